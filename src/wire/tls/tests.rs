use super::super::openssl::Openssl;
use std::net::{SocketAddr, TcpListener};
use std::sync::OnceLock;
use std::thread::JoinHandle;

use rustls::server::WebPkiClientVerifier;
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use super::super::link::{self, Frames, Read1};
use super::*;

/// Test certificates made by `openssl`: a CA, a leaf it signed for 127.0.0.1 and
/// localhost (used by the server and as the client's identity), and a CA that signed
/// nothing here.
struct Pki {
    ca: String,
    other_ca: String,
    cert: String,
    key: String,
}

const OPENSSL_CNF: &str = "\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = zklock-test
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[leaf]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
";

/// The certificates, made once per test run; `None` (after saying so) without openssl.
fn pki(test: &str) -> Option<&'static Pki> {
    static PKI: OnceLock<Option<Pki>> = OnceLock::new();
    let pki = PKI.get_or_init(make_pki).as_ref();
    if pki.is_none() {
        // CI installs openssl (scripts/test.sh): there a missing one is a failure, not a
        // test quietly passed.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: no openssl to make test certificates"
        );
        eprintln!("SKIPPED {test}: no openssl to make test certificates");
    }
    pki
}

fn make_pki() -> Option<Pki> {
    let openssl = Openssl::new("tls")?;
    std::fs::write(openssl.dir.join("openssl.cnf"), OPENSSL_CNF).unwrap();
    let run = |args: &[&str]| {
        openssl.run(args);
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for (ca, key, cn) in [
        ("ca.pem", "ca-key.pem", "/CN=zklock-test-ca"),
        ("other-ca.pem", "other-ca-key.pem", "/CN=zklock-other-ca"),
    ] {
        let mut args = vec!["req", "-config", "openssl.cnf", "-x509", "-new"];
        args.extend(ec);
        args.extend([
            "-keyout",
            key,
            "-out",
            ca,
            "-days",
            "2",
            "-subj",
            cn,
            "-extensions",
            "ca",
        ]);
        run(&args);
    }
    let mut args = vec!["req", "-config", "openssl.cnf", "-new"];
    args.extend(ec);
    args.extend([
        "-keyout",
        "leaf-key.pem",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=localhost",
    ]);
    run(&args);
    run(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "openssl.cnf",
        "-extensions",
        "leaf",
        "-out",
        "leaf.pem",
    ]);
    Some(Pki {
        ca: openssl.read("ca.pem"),
        other_ca: openssl.read("other-ca.pem"),
        cert: openssl.read("leaf.pem"),
        key: openssl.read("leaf-key.pem"),
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A one-connection TLS server that echoes what it reads, until the client goes away. After
/// the first echo it updates its TLS 1.3 keys, which the client must answer in kind.
fn echo_server(pki: &Pki, client_auth: bool) -> (SocketAddr, JoinHandle<Result<(), String>>) {
    let chain: Vec<_> = CertificateDer::pem_slice_iter(pki.cert.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki.key.as_bytes()).unwrap();
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if client_auth {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(pki.ca.as_bytes()).unwrap())
            .unwrap();
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = Arc::new(builder.with_single_cert(chain, key).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || -> Result<(), String> {
        let (tcp, _) = listener.accept().map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        tcp.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let conn = ServerConnection::new(config).map_err(|e| e.to_string())?;
        let mut tls = StreamOwned::new(conn, tcp);
        let mut buf = vec![0; 8192];
        let mut updated = false;
        loop {
            match tls.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => tls.write_all(&buf[..n]).map_err(|e| e.to_string())?,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
            if !updated {
                updated = true;
                tls.conn.refresh_traffic_keys().map_err(|e| e.to_string())?;
                tls.flush().map_err(|e| e.to_string())?;
            }
        }
    });
    (addr, server)
}

fn tcp(addr: SocketAddr) -> TcpStream {
    link::tcp(addr, Duration::from_secs(2)).unwrap()
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

fn refused(connected: Result<Link, String>) -> String {
    match connected {
        Ok(_) => panic!("connected"),
        Err(e) => e,
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as i32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

/// Sends frames of several sizes (one far over a TLS record and rustls's send buffer)
/// and reads each back.
fn echo_round_trips(link: &mut Link) {
    let mut frames = Frames::new(1 << 21);
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    for body in [&b"hello"[..], &big, b"", &[7; 16 * 1024 + 1], b"after"] {
        link.sink.send(&frame(body)).unwrap();
        let got = super::super::attempt::read_frame(link, &mut frames, soon()).unwrap();
        assert!(got == body, "{} bytes back for {}", got.len(), body.len());
    }
    // Nothing more: the read times out as an idle read, not an error.
    link.source.set_timeout(Duration::from_millis(50)).unwrap();
    assert!(matches!(
        frames.next(link.source.as_mut()).unwrap(),
        Read1::Idle
    ));
}

#[test]
fn from_pem_refuses_garbage_and_empty_bundles() {
    for ca in [
        "",
        "garbage",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    ] {
        let err = TlsConfig::from_pem(ca, None).unwrap_err();
        assert!(err.contains("CA bundle: no certificate"), "{ca:?}: {err}");
    }
    let not_der = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let err = TlsConfig::from_pem(not_der, None).unwrap_err();
    assert!(err.starts_with("CA bundle: certificate 1:"), "{err}");
    let not_base64 = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
    assert!(TlsConfig::from_pem(not_base64, None)
        .unwrap_err()
        .starts_with("CA bundle:"));
    let unterminated = "-----BEGIN CERTIFICATE-----\nAAAA\n";
    assert!(TlsConfig::from_pem(unterminated, None)
        .unwrap_err()
        .starts_with("CA bundle:"));
}

#[test]
fn from_pem_checks_the_client_identity() {
    let Some(pki) = pki("from_pem_checks_the_client_identity") else {
        return;
    };
    assert!(TlsConfig::from_pem(&pki.ca, None).is_ok());
    assert!(TlsConfig::from_pem(&pki.ca, Some((&pki.cert, &pki.key))).is_ok());
    let err = TlsConfig::from_pem(&pki.ca, Some(("", &pki.key))).unwrap_err();
    assert!(
        err.starts_with("client certificate: no certificate"),
        "{err}"
    );
    let err = TlsConfig::from_pem(&pki.ca, Some((&pki.cert, "garbage"))).unwrap_err();
    assert!(err.starts_with("client key: no private key"), "{err}");
    let err = TlsConfig::from_pem(&pki.ca, Some((&pki.cert, &pki.cert))).unwrap_err();
    assert!(err.starts_with("client key:"), "{err}");
}

#[test]
fn handshake_and_echo_by_ip_address() {
    let Some(pki) = pki("handshake_and_echo_by_ip_address") else {
        return;
    };
    let tls = TlsConfig::from_pem(&pki.ca, None).unwrap();
    let (addr, server) = echo_server(pki, false);
    let mut link = connect(&tls, "127.0.0.1", tcp(addr), soon()).unwrap();
    echo_round_trips(&mut link);
    link.closer.close();
    server.join().unwrap().unwrap();
}

#[test]
fn handshake_and_echo_by_name_with_a_client_certificate() {
    let Some(pki) = pki("handshake_and_echo_by_name_with_a_client_certificate") else {
        return;
    };
    let tls = TlsConfig::from_pem(&pki.ca, Some((&pki.cert, &pki.key))).unwrap();
    let (addr, server) = echo_server(pki, true);
    let mut link = connect(&tls, "localhost", tcp(addr), soon()).unwrap();
    echo_round_trips(&mut link);
    link.closer.close();
    server.join().unwrap().unwrap();
}

#[test]
fn a_waiting_reader_does_not_hold_up_a_writer() {
    let Some(pki) = pki("a_waiting_reader_does_not_hold_up_a_writer") else {
        return;
    };
    let tls = TlsConfig::from_pem(&pki.ca, None).unwrap();
    let (addr, server) = echo_server(pki, false);
    let Link {
        mut sink,
        mut source,
        closer,
    } = connect(&tls, "127.0.0.1", tcp(addr), soon()).unwrap();
    let reader = std::thread::spawn(move || {
        source.set_timeout(Duration::from_secs(3)).unwrap();
        let mut frames = Frames::new(1 << 20);
        let started = Instant::now();
        // A call that reads only records without data (the server's session tickets)
        // comes back idle.
        loop {
            match frames.next(source.as_mut()) {
                Ok(Read1::Frame(f)) => break (f, started.elapsed()),
                Ok(Read1::Idle) if started.elapsed() < Duration::from_secs(3) => {}
                _ => panic!("no frame"),
            }
        }
    });
    // The reader is blocked in its socket read by now.
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    sink.send(&frame(b"while reading")).unwrap();
    assert!(
        sent.elapsed() < Duration::from_millis(500),
        "{:?}",
        sent.elapsed()
    );
    let (got, waited) = reader.join().unwrap();
    assert_eq!(got, b"while reading");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    closer.close();
    server.join().unwrap().unwrap();
}

#[test]
fn a_missing_client_certificate_fails_the_first_read() {
    let Some(pki) = pki("a_missing_client_certificate_fails_the_first_read") else {
        return;
    };
    let tls = TlsConfig::from_pem(&pki.ca, None).unwrap();
    let (addr, server) = echo_server(pki, true);
    // In TLS 1.3 the client finishes its side first: the server's refusal is an alert
    // that the first read meets.
    let started = Instant::now();
    let mut link = connect(&tls, "127.0.0.1", tcp(addr), soon()).unwrap();
    let _ = link.sink.send(&frame(b"hello"));
    let mut frames = Frames::new(1 << 20);
    let err = super::super::attempt::read_frame(&mut link, &mut frames, soon()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    assert!(err.to_string().contains("CertificateRequired"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(server.join().unwrap().is_err());
}

#[test]
fn untrusted_or_misnamed_servers_are_refused() {
    let Some(pki) = pki("untrusted_or_misnamed_servers_are_refused") else {
        return;
    };
    let untrusted = TlsConfig::from_pem(&pki.other_ca, None).unwrap();
    let trusted = TlsConfig::from_pem(&pki.ca, None).unwrap();
    for (tls, host, why) in [
        (&untrusted, "127.0.0.1", "UnknownIssuer"),
        (&trusted, "zk.example.com", "not valid for name"),
        (&trusted, "127.0.0.2", "not valid for name"),
    ] {
        let (addr, server) = echo_server(pki, false);
        let started = Instant::now();
        let err = refused(connect(tls, host, tcp(addr), soon()));
        assert!(
            err.contains("handshake with") && err.contains(why),
            "{host}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(4));
        assert!(server.join().unwrap().is_err());
    }
}

#[test]
fn a_silent_server_fails_the_handshake_by_the_deadline() {
    let Some(pki) = pki("a_silent_server_fails_the_handshake_by_the_deadline") else {
        return;
    };
    let tls = TlsConfig::from_pem(&pki.ca, None).unwrap();
    // The kernel accepts the connection; no one ever answers the ClientHello.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    let deadline = started + Duration::from_millis(300);
    let err = refused(connect(
        &tls,
        "127.0.0.1",
        tcp(listener.local_addr().unwrap()),
        deadline,
    ));
    let took = started.elapsed();
    assert!(err.contains("in time"), "{err}");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "{took:?}"
    );
}

#[test]
fn a_host_that_is_no_server_name_is_an_error() {
    let Some(pki) = pki("a_host_that_is_no_server_name_is_an_error") else {
        return;
    };
    let tls = TlsConfig::from_pem(&pki.ca, None).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let stream = tcp(listener.local_addr().unwrap());
    let err = refused(connect(&tls, "not a name!", stream, soon()));
    assert!(
        err.contains("neither a DNS name nor an IP address"),
        "{err}"
    );
}

/// Writes `bytes` one every 20 ms, for at most 4 s or until the client goes away.
fn trickle(socket: &mut TcpStream, bytes: &[u8]) {
    let until = Instant::now() + Duration::from_secs(4);
    for b in bytes {
        if Instant::now() >= until || socket.write_all(&[*b]).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_trickled_handshake_fails_by_the_deadline() {
    let Some(pki) = pki("a_trickled_handshake_fails_by_the_deadline") else {
        return;
    };
    let tls = TlsConfig::from_pem(&pki.ca, None).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Answers the ClientHello with the header of a 16 KiB handshake record, then its
    // bytes one at a time: each read gets something, none completes the record.
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let _ = socket.read(&mut [0; 4096]);
        let mut record = vec![0x16, 0x03, 0x03, 0x40, 0x00];
        record.resize(5 + 0x4000, 0);
        trickle(&mut socket, &record);
    });
    let started = Instant::now();
    let err = refused(connect(
        &tls,
        "127.0.0.1",
        tcp(addr),
        started + Duration::from_millis(300),
    ));
    let took = started.elapsed();
    assert!(err.contains("in time"), "{err}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    server.join().unwrap();
}

#[test]
fn a_trickled_record_does_not_hold_the_reader() {
    let Some(pki) = pki("a_trickled_record_does_not_hold_the_reader") else {
        return;
    };
    let tls = TlsConfig::from_pem(&pki.ca, None).unwrap();
    let chain: Vec<_> = CertificateDer::pem_slice_iter(pki.cert.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki.key.as_bytes()).unwrap();
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // A proper handshake, then a frame's record sent one byte at a time.
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut conn = ServerConnection::new(Arc::new(config)).unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut socket).unwrap();
        }
        while conn.wants_write() {
            conn.write_tls(&mut socket).unwrap();
        }
        conn.writer().write_all(&frame(&[5; 2000])).unwrap();
        let mut records = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut records).unwrap();
        }
        trickle(&mut socket, &records);
    });
    let mut link = connect(&tls, "127.0.0.1", tcp(addr), soon()).unwrap();
    link.source.set_timeout(Duration::from_millis(100)).unwrap();
    let mut frames = Frames::new(1 << 20);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        let call = Instant::now();
        let read = frames.next(link.source.as_mut()).unwrap();
        assert!(matches!(read, Read1::Idle), "a whole frame already");
        let took = call.elapsed();
        assert!(
            took < Duration::from_millis(500),
            "one read call took {took:?}"
        );
    }
    link.closer.close();
    server.join().unwrap();
}

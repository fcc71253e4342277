//! TLS to ZooKeeper's secure client port: rustls (with ring) over a link's TCP connection.
//!
//! A link's two halves share one `rustls::ClientConnection` behind a mutex, each with its own
//! handle on the socket: callers write requests through the sink, the session's I/O thread
//! reads through the source. The source waits in a blocking read on its socket without the
//! lock, so an idle read never holds up a request; only sealing, opening and writing records
//! happen under it, and every record rustls wants to send goes out under it too, so the two
//! halves never interleave records on the wire.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::link::{Closer, Link, Sink, Source};

/// What a TLS connection trusts and shows: the CA bundle and an optional client identity.
#[derive(Clone)]
pub(crate) struct TlsConfig {
    config: Arc<ClientConfig>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig").finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// From PEM: the CA bundle to trust, and optionally a client identity (cert chain PEM,
    /// private key PEM: PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    /// A message naming the part that is wrong: a bundle without a certificate, a section
    /// that does not decode, a key that does not match the certificate.
    pub(crate) fn from_pem(
        ca_pem: &str,
        identity: Option<(&str, &str)>,
    ) -> Result<TlsConfig, String> {
        let mut roots = RootCertStore::empty();
        for (i, cert) in CertificateDer::pem_slice_iter(ca_pem.as_bytes()).enumerate() {
            let cert = cert.map_err(|e| format!("CA bundle: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("CA bundle: certificate {}: {e}", i + 1))?;
        }
        if roots.is_empty() {
            return Err(format!("CA bundle: no certificate {EXPECTED_CERTIFICATES}"));
        }
        // An explicit provider: with none given, rustls looks for a process-wide default and
        // panics if the application's dependency graph enables a second one (aws-lc-rs).
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS setup: {e}"))?
                .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((chain_pem, key_pem)) => {
                let chain = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("client certificate: {e}"))?;
                if chain.is_empty() {
                    return Err(format!(
                        "client certificate: no certificate {EXPECTED_CERTIFICATES}"
                    ));
                }
                let key =
                    PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| match e {
                        pem::Error::NoItemsFound => {
                            format!("client key: no private key {EXPECTED_KEY}")
                        }
                        e => format!("client key: {e}"),
                    })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("client identity: {e}"))?
            }
        };
        Ok(TlsConfig {
            config: Arc::new(config),
        })
    }
}

const EXPECTED_CERTIFICATES: &str = "(expected PEM \"BEGIN CERTIFICATE\" sections)";
const EXPECTED_KEY: &str = "(expected PEM \"BEGIN PRIVATE KEY\", \"BEGIN RSA PRIVATE KEY\" \
    or \"BEGIN EC PRIVATE KEY\")";

/// The raw bytes read from the socket at once: a full TLS record (16 KiB of plaintext plus its
/// header and tag) and some. What rustls has not taken yet waits here for the next call, so
/// the source never holds more than this and one record's plaintext.
const RAW_BUFFER: usize = 18 * 1024;

/// TLS handshake over `stream` (already connected, TCP_NODELAY set) for server name `host` (a
/// DNS name or an IP address), done before `deadline`.
///
/// Blocks until the handshake is done, fails, or `deadline` passes.
///
/// # Errors
/// Why the handshake failed: rustls's verdict on the server's certificate, the server's
/// alert, the connection's end, or the deadline.
pub(crate) fn connect(
    tls: &TlsConfig,
    host: &str,
    stream: TcpStream,
    deadline: Instant,
) -> Result<Link, String> {
    // The connect string writes IPv6 addresses in brackets.
    let name = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let server_name = ServerName::try_from(name.to_owned())
        .map_err(|_| format!("{host:?} is neither a DNS name nor an IP address"))?;
    let mut conn = ClientConnection::new(tls.config.clone(), server_name)
        .map_err(|e| format!("cannot start a TLS session: {e}"))?;
    let mut socket = stream;
    handshake(&mut conn, &mut socket, deadline)
        .map_err(|e| format!("handshake with {host} failed: {e}"))?;
    let split = |socket: &TcpStream| {
        socket
            .try_clone()
            .map_err(|e| format!("cannot share the socket: {e}"))
    };
    let conn = Arc::new(Mutex::new(conn));
    Ok(Link {
        sink: Box::new(TlsSink {
            conn: conn.clone(),
            socket: split(&socket)?,
        }),
        source: Box::new(TlsSource {
            conn,
            socket: split(&socket)?,
            raw: vec![0; RAW_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
        }),
        closer: Closer::new(socket),
    })
}

/// Runs the handshake to its end, each read waiting at most until `deadline`.
fn handshake(
    conn: &mut ClientConnection,
    socket: &mut TcpStream,
    deadline: Instant,
) -> io::Result<()> {
    while conn.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer from the server in time",
            ));
        }
        flush(conn, socket)?;
        socket.set_read_timeout(Some(left))?;
        // One read per turn, not rustls's complete_io, which reads on until the handshake
        // moves: a server that trickles a record a byte at a time would keep it there, past
        // the deadline, for as long as it likes.
        match conn.read_tls(socket) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                ))
            }
            Ok(_) => {
                if let Err(e) = conn.process_new_packets() {
                    // The alert that tells the server why, if it still takes it.
                    let _ = flush(conn, socket);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
            }
            // The read timed out (the loop checks the deadline) or a signal came.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    flush(conn, socket)
}

/// Writes every record the connection has sealed to `socket`.
fn flush(conn: &mut ClientConnection, socket: &mut TcpStream) -> io::Result<()> {
    while conn.wants_write() {
        match conn.write_tls(socket) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

struct TlsSink {
    conn: Arc<Mutex<ClientConnection>>,
    socket: TcpStream,
}

impl Sink for TlsSink {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        let mut conn = self.conn.lock();
        let mut rest = frame;
        while !rest.is_empty() {
            // rustls takes plaintext up to its buffer limit (64 KiB); flushing after each
            // piece keeps a 1 MiB frame from being refused or buffered whole.
            let taken = conn.writer().write(rest)?;
            rest = &rest[taken..];
            flush(&mut conn, &mut self.socket)?;
            if taken == 0 {
                // Its buffer was just emptied: a refusal now would repeat forever.
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }
}

struct TlsSource {
    conn: Arc<Mutex<ClientConnection>>,
    socket: TcpStream,
    /// Bytes read from the socket; `start..end` not yet taken by rustls.
    raw: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Source for TlsSource {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut read = false;
        loop {
            {
                let mut conn = self.conn.lock();
                // Plaintext first: what is left of the last record, or what arrived with the
                // handshake. Ok(0) is the server's close_notify, UnexpectedEof a TCP end
                // without it.
                match conn.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    done => return done,
                }
                if self.start < self.end {
                    let taken = conn.read_tls(&mut &self.raw[self.start..self.end])?;
                    if taken == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "TLS: the connection takes no more data",
                        ));
                    }
                    self.start += taken;
                    let processed = conn.process_new_packets();
                    // Alerts and key updates the server's records call for go out at once;
                    // on an error, the alert that tells the server why.
                    let flushed = flush(&mut conn, &mut self.socket);
                    if let Err(e) = processed {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("TLS: {e}"),
                        ));
                    }
                    flushed?;
                    continue;
                }
            }
            if read {
                // One socket read per call: what it brought completes no record (or only
                // records without data). Idle, as after a read timeout, so that the caller
                // looks at its clock: a server that trickles a record must not hold it here.
                return Err(io::ErrorKind::WouldBlock.into());
            }
            read = true;
            // Without the lock: a caller may write a request meanwhile.
            let n = self.socket.read(&mut self.raw)?;
            (self.start, self.end) = (0, n);
            if n == 0 {
                // Tells rustls the stream ended: its reader then says how (see above).
                self.conn.lock().read_tls(&mut io::empty())?;
            }
        }
    }

    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.socket
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
    }
}

#[cfg(test)]
mod tests;

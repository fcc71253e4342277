//! SASL DIGEST-MD5 (RFC 2831) as ZooKeeper's server speaks it: the JDK's `SaslServer` for
//! protocol "zookeeper" and server name "zk-sasl-md5", driven the way ZooKeeper's Java client
//! (`ZooKeeperSaslClient`) drives it, in SASL packets (op 102) sent before any other request.
//!
//! The exchange has three rounds: an empty token (DIGEST-MD5 has no initial response) answered
//! by the digest challenge; the digest response answered by `rspauth`, the server's proof that
//! it knows the password too; nothing more. The `rspauth` is checked: a server that cannot
//! prove it knows the password is not trusted with a lock.

use std::io;
use std::time::Instant;

use super::attempt::{self, AttemptError};
use super::jute::{Reader, Writer};
use super::link::{Frames, Link};
use super::proto::{op, ReplyHeader};
use crate::rt::relay::io_log;

/// ZooKeeper's server creates its `SaslServer` for protocol "zookeeper" and server name
/// "zk-sasl-md5", whatever host it runs on, and checks the response's digest-uri against them.
const DIGEST_URI: &str = "zookeeper/zk-sasl-md5";

/// The largest token accepted from the server. RFC 2831 bounds a challenge at 2048 bytes; twice
/// that leaves room for a lenient server while bounding what is parsed.
const MAX_TOKEN: usize = 4096;

/// `KeeperException.Code.AUTHFAILED`.
const AUTH_FAILED: i32 = -115;
/// `SESSIONCLOSEDREQUIRESASLAUTH`: the server's answer to failed credentials when it enforces
/// SASL (`enforce.auth.schemes=sasl`); for a client it is a refusal like AUTHFAILED.
const SESSION_CLOSED_REQUIRE_SASL_AUTH: i32 = -124;

/// Runs the SASL exchange on a freshly established session, before any other request.
///
/// Blocks until the exchange is over or `deadline` passes. Refused credentials, and a server
/// that fails to prove it knows the password, are [`AttemptError::AuthFailed`]; a challenge
/// that cannot be answered (no nonce, no `auth` quality of protection) or a broken reply is an
/// [`AttemptError::Io`] of kind `InvalidData`. `host` only names the server in messages.
pub(crate) fn authenticate(
    link: &mut Link,
    frames: &mut Frames,
    user: &str,
    password: &str,
    host: &str,
    deadline: Instant,
) -> Result<(), AttemptError> {
    let mut exchange = Exchange {
        link,
        frames,
        deadline,
        xid: 0,
    };
    let challenge = exchange.round(&[])?;
    let challenge = Challenge::parse(&challenge).map_err(invalid)?;
    // 122 random bits: the cnonce only has to be unpredictable to the server.
    let cnonce = crate::random::Uuid::new_v4().simple();
    let answer = respond(&challenge, user, password, &cnonce, DIGEST_URI).map_err(invalid)?;
    let proof = exchange.round(&answer.token)?;
    match rspauth(&proof) {
        Some(got) if got.eq_ignore_ascii_case(answer.rspauth.as_bytes()) => {
            io_log!(
                Debug,
                "SASL DIGEST-MD5: authenticated to {host} as {user:?}"
            );
            Ok(())
        }
        _ => {
            io_log!(
                Warn,
                "SASL DIGEST-MD5: {host} accepted {user:?} but did not prove it knows the password \
                 (missing or wrong rspauth)"
            );
            Err(AttemptError::AuthFailed)
        }
    }
}

fn invalid(why: String) -> AttemptError {
    AttemptError::Io(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("SASL DIGEST-MD5: {why}"),
    ))
}

/// The SASL rounds of one connection.
struct Exchange<'a> {
    link: &'a mut Link,
    frames: &'a mut Frames,
    deadline: Instant,
    xid: i32,
}

impl Exchange<'_> {
    /// Sends `token` in a SASL packet and returns the server's token.
    fn round(&mut self, token: &[u8]) -> Result<Vec<u8>, AttemptError> {
        // Positive xids of our own: the server only echoes them, and the session's I/O thread
        // numbers its requests afresh once this exchange is over.
        self.xid += 1;
        let mut w = Writer::frame();
        w.int(self.xid).int(op::SASL).buffer(token);
        self.link.sink.send(&w.finish())?;
        let frame = attempt::read_frame(self.link, self.frames, self.deadline)?;
        let mut r = Reader::new(&frame);
        let header = ReplyHeader::read(&mut r)?;
        if header.xid != self.xid {
            // No watch is set yet, so not even a notification may come before our answer.
            return Err(invalid(format!(
                "reply xid {} to SASL request {}",
                header.xid, self.xid
            )));
        }
        match header.err {
            0 => {}
            AUTH_FAILED | SESSION_CLOSED_REQUIRE_SASL_AUTH => return Err(AttemptError::AuthFailed),
            err => return Err(invalid(format!("the server answered with error {err}"))),
        }
        let token = r.buffer().map_err(super::jute::Malformed::from)?;
        if token.len() > MAX_TOKEN {
            return Err(invalid(format!("a token of {} bytes", token.len())));
        }
        Ok(token.to_vec())
    }
}

/// What the client needs of the server's digest challenge.
#[derive(Debug, PartialEq, Eq)]
struct Challenge {
    /// The realms offered, decoded; the first is used.
    realms: Vec<String>,
    /// Opaque: echoed and hashed as the server sent it.
    nonce: Vec<u8>,
    /// `charset=utf-8`: names and passwords beyond ISO 8859-1 go as UTF-8.
    utf8: bool,
}

impl Challenge {
    fn parse(token: &[u8]) -> Result<Challenge, String> {
        let mut realms = Vec::new();
        let (mut nonce, mut qop, mut charset, mut algorithm) = (None, None, None, None);
        for (name, value) in directives(token)? {
            let once = match name.as_str() {
                "realm" => {
                    realms.push(value);
                    continue;
                }
                "nonce" => &mut nonce,
                "qop" => &mut qop,
                "charset" => &mut charset,
                "algorithm" => &mut algorithm,
                // maxbuf, cipher, stale, and whatever an extension adds.
                _ => continue,
            };
            if once.replace(value).is_some() {
                return Err(format!("the challenge has {name} twice"));
            }
        }
        let nonce = nonce
            .filter(|n| !n.is_empty())
            .ok_or("the challenge has no nonce")?;
        // RFC 2831: without qop-options the server offers "auth" alone.
        if let Some(qop) = qop {
            let offers_auth = qop
                .split(|&b| b == b',')
                .any(|q| q.trim_ascii().eq_ignore_ascii_case(b"auth"));
            if !offers_auth {
                return Err(format!(
                    "the server does not offer qop=auth (it offers {:?})",
                    String::from_utf8_lossy(&qop)
                ));
            }
        }
        let utf8 = match charset {
            None => false,
            Some(c) if c.eq_ignore_ascii_case(b"utf-8") => true,
            Some(c) => return Err(format!("unknown charset {:?}", String::from_utf8_lossy(&c))),
        };
        match algorithm {
            Some(a) if a.eq_ignore_ascii_case(b"md5-sess") => {}
            Some(a) => {
                return Err(format!(
                    "unknown algorithm {:?}",
                    String::from_utf8_lossy(&a)
                ))
            }
            None => return Err("the challenge has no algorithm".into()),
        }
        let realms = realms
            .into_iter()
            .map(|r| decode(r, utf8))
            .collect::<Result<_, _>>()?;
        Ok(Challenge {
            realms,
            nonce,
            utf8,
        })
    }
}

/// A challenge's text: UTF-8 if the server said so, else ISO 8859-1 (RFC 2831 2.1.1).
fn decode(bytes: Vec<u8>, utf8: bool) -> Result<String, String> {
    if utf8 {
        String::from_utf8(bytes).map_err(|_| "a realm that is not UTF-8".to_owned())
    } else {
        Ok(bytes.into_iter().map(char::from).collect())
    }
}

/// The `name=value` directives of a token, names in lower case, values unquoted.
///
/// RFC 2831's list syntax: elements separated by commas, empty elements allowed, white space
/// around the separators, values either tokens or quoted strings in which a backslash escapes
/// the next byte.
fn directives(token: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    if token.len() > MAX_TOKEN {
        return Err(format!("a token of {} bytes", token.len()));
    }
    let mut out = Vec::new();
    let mut i = 0;
    let skip_space = |i: &mut usize| {
        while token
            .get(*i)
            .is_some_and(|&b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        {
            *i += 1;
        }
    };
    loop {
        skip_space(&mut i);
        match token.get(i) {
            None => return Ok(out),
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(_) => {}
        }
        let start = i;
        while token.get(i).is_some_and(|&b| is_token_byte(b)) {
            i += 1;
        }
        if i == start {
            return Err(format!("unexpected byte {:#04x} at {i}", token[i]));
        }
        let name = String::from_utf8_lossy(&token[start..i]).to_ascii_lowercase();
        skip_space(&mut i);
        if token.get(i) != Some(&b'=') {
            return Err(format!("directive {name} has no value"));
        }
        i += 1;
        skip_space(&mut i);
        let value = if token.get(i) == Some(&b'"') {
            i += 1;
            let mut value = Vec::new();
            loop {
                match token.get(i) {
                    None => return Err(format!("the quoted value of {name} is not closed")),
                    Some(b'"') => break,
                    Some(b'\\') => {
                        let Some(&escaped) = token.get(i + 1) else {
                            return Err(format!("the quoted value of {name} is not closed"));
                        };
                        value.push(escaped);
                        i += 2;
                    }
                    Some(&b) => {
                        value.push(b);
                        i += 1;
                    }
                }
            }
            i += 1;
            value
        } else {
            // An unquoted value runs to the next separator; lenient about which bytes it holds,
            // as servers differ.
            let start = i;
            while token
                .get(i)
                .is_some_and(|&b| b > b' ' && b != b',' && b != b'"' && b != 0x7f)
            {
                i += 1;
            }
            if i == start {
                return Err(format!("directive {name} has an empty value"));
            }
            token[start..i].to_vec()
        };
        skip_space(&mut i);
        if token.get(i).is_some_and(|&b| b != b',') {
            return Err(format!("no comma after directive {name}"));
        }
        out.push((name, value));
    }
}

/// RFC 2616's token characters: no controls, no separators.
fn is_token_byte(b: u8) -> bool {
    b > b' ' && b < 0x7f && !b"()<>@,;:\\\"/[]?={}".contains(&b)
}

/// The value of `rspauth` in the server's last token, if it has one.
fn rspauth(token: &[u8]) -> Option<Vec<u8>> {
    directives(token)
        .ok()?
        .into_iter()
        .find(|(name, _)| name == "rspauth")
        .map(|(_, value)| value)
}

/// The client's digest response and the `rspauth` the server must answer it with.
struct Answer {
    token: Vec<u8>,
    rspauth: String,
}

/// The digest response to `challenge` (RFC 2831 2.1.2), without an authorization id.
fn respond(
    challenge: &Challenge,
    user: &str,
    password: &str,
    cnonce: &str,
    digest_uri: &str,
) -> Result<Answer, String> {
    let realm = challenge.realms.first().map_or("", String::as_str);
    let hashed = |what: &str, s: &str| {
        hashed(s, challenge.utf8).ok_or_else(|| {
            format!(
                "{what} has characters beyond ISO 8859-1 \
                 and the server did not offer charset=utf-8"
            )
        })
    };
    let digest = Digest {
        user: hashed("the user name", user)?,
        realm: hashed("the realm", realm)?,
        password: hashed("the password", password)?,
        nonce: &challenge.nonce,
        cnonce: cnonce.as_bytes(),
        digest_uri: digest_uri.as_bytes(),
    };
    // The names go on the wire in the challenge's charset (UTF-8 or ISO 8859-1); `hashed`
    // already refused what ISO 8859-1 cannot carry.
    let text = |s: &str| {
        if challenge.utf8 {
            s.as_bytes().to_vec()
        } else {
            s.chars().map(|c| c as u8).collect()
        }
    };
    let mut token = Vec::new();
    if challenge.utf8 {
        token.extend_from_slice(b"charset=utf-8,");
    }
    token.extend_from_slice(b"username=");
    quote(&mut token, &text(user));
    if !challenge.realms.is_empty() {
        token.extend_from_slice(b",realm=");
        quote(&mut token, &text(realm));
    }
    token.extend_from_slice(b",nonce=");
    quote(&mut token, &challenge.nonce);
    token.extend_from_slice(format!(",nc={NC},cnonce=").as_bytes());
    quote(&mut token, cnonce.as_bytes());
    token.extend_from_slice(b",digest-uri=");
    quote(&mut token, digest_uri.as_bytes());
    token.extend_from_slice(
        format!(",maxbuf=65536,response={},qop=auth", digest.response()).as_bytes(),
    );
    Ok(Answer {
        token,
        rspauth: digest.rspauth(),
    })
}

/// Our only response to a nonce is the first.
const NC: &str = "00000001";

/// A string as it is hashed, the way the JDK's DIGEST-MD5 does on both sides (its
/// `stringToByte_8859_1`): ISO 8859-1 when every character fits, else UTF-8 if the server
/// offered it. RFC 2831 asks the same of names and passwords.
fn hashed(s: &str, utf8: bool) -> Option<Vec<u8>> {
    if s.chars().all(|c| (c as u32) <= 0xff) {
        Some(s.chars().map(|c| c as u8).collect())
    } else if utf8 {
        Some(s.as_bytes().to_vec())
    } else {
        None
    }
}

/// Appends `value` as a quoted string.
fn quote(out: &mut Vec<u8>, value: &[u8]) {
    out.push(b'"');
    for &b in value {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// The inputs of the md5-sess digest (RFC 2831 2.1.2.1), qop "auth", no authorization id.
struct Digest<'a> {
    user: Vec<u8>,
    realm: Vec<u8>,
    password: Vec<u8>,
    nonce: &'a [u8],
    cnonce: &'a [u8],
    digest_uri: &'a [u8],
}

impl Digest<'_> {
    /// The client's `response` value: A2 = "AUTHENTICATE:" digest-uri.
    fn response(&self) -> String {
        self.kd(b"AUTHENTICATE:")
    }

    /// The server's `rspauth` value: the same with an empty method in A2.
    fn rspauth(&self) -> String {
        self.kd(b":")
    }

    /// HEX(KD(HEX(H(A1)), nonce:nc:cnonce:qop:HEX(H(A2)))).
    fn kd(&self, a2_method: &[u8]) -> String {
        let mut secret = md5::Context::new();
        secret.consume(&self.user);
        secret.consume(b":");
        secret.consume(&self.realm);
        secret.consume(b":");
        secret.consume(&self.password);
        let mut a1 = md5::Context::new();
        a1.consume(secret.compute().0);
        a1.consume(b":");
        a1.consume(self.nonce);
        a1.consume(b":");
        a1.consume(self.cnonce);
        let mut a2 = md5::Context::new();
        a2.consume(a2_method);
        a2.consume(self.digest_uri);
        let mut kd = md5::Context::new();
        kd.consume(format!("{:x}", a1.compute()));
        kd.consume(b":");
        kd.consume(self.nonce);
        kd.consume(format!(":{NC}:"));
        kd.consume(self.cnonce);
        kd.consume(b":auth:");
        kd.consume(format!("{:x}", a2.compute()));
        format!("{:x}", kd.compute())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RFC_CHALLENGE: &[u8] = b"realm=\"elwood.innosoft.com\",nonce=\"OA6MG9tEQGm2hh\",\
        qop=\"auth\",algorithm=md5-sess,charset=utf-8";

    #[test]
    fn rfc_2831_example() {
        let digest = Digest {
            user: b"chris".to_vec(),
            realm: b"elwood.innosoft.com".to_vec(),
            password: b"secret".to_vec(),
            nonce: b"OA6MG9tEQGm2hh",
            cnonce: b"OA6MHXh6VqTrRk",
            digest_uri: b"imap/elwood.innosoft.com",
        };
        assert_eq!(digest.response(), "d388dad90d4bbd760a152321f2143af7");
        assert_eq!(digest.rspauth(), "ea40f60335c427b5527b84dbabcdfffd");
    }

    #[test]
    fn rfc_2831_example_through_the_challenge_and_the_response_token() {
        let challenge = Challenge::parse(RFC_CHALLENGE).unwrap();
        assert_eq!(
            challenge,
            Challenge {
                realms: vec!["elwood.innosoft.com".into()],
                nonce: b"OA6MG9tEQGm2hh".to_vec(),
                utf8: true,
            }
        );
        let answer = respond(
            &challenge,
            "chris",
            "secret",
            "OA6MHXh6VqTrRk",
            "imap/elwood.innosoft.com",
        )
        .unwrap();
        assert_eq!(answer.rspauth, "ea40f60335c427b5527b84dbabcdfffd");
        let sent: Vec<(String, Vec<u8>)> = directives(&answer.token).unwrap();
        let get = |name: &str| {
            let found: Vec<&[u8]> = sent
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_slice())
                .collect();
            assert_eq!(
                found.len(),
                1,
                "{name} in {:?}",
                String::from_utf8_lossy(&answer.token)
            );
            found[0].to_vec()
        };
        assert_eq!(get("response"), b"d388dad90d4bbd760a152321f2143af7");
        assert_eq!(get("username"), b"chris");
        assert_eq!(get("realm"), b"elwood.innosoft.com");
        assert_eq!(get("nonce"), b"OA6MG9tEQGm2hh");
        assert_eq!(get("cnonce"), b"OA6MHXh6VqTrRk");
        assert_eq!(get("nc"), b"00000001");
        assert_eq!(get("qop"), b"auth");
        assert_eq!(get("digest-uri"), b"imap/elwood.innosoft.com");
        assert_eq!(get("charset"), b"utf-8");
        assert_eq!(get("maxbuf"), b"65536");
        assert_eq!(
            rspauth(b"rspauth=ea40f60335c427b5527b84dbabcdfffd").unwrap(),
            answer.rspauth.as_bytes()
        );
    }

    #[test]
    fn zookeepers_challenge() {
        // What ZooKeeper 3.8's server (the JDK's DigestMD5Server) sends.
        let token = b"realm=\"zk-sasl-md5\",nonce=\"d8Wn6ZG0cFl+Y+K0BkO2sk2Jw4XN6sD4Q4u0R0Ll\",\
            charset=utf-8,algorithm=md5-sess";
        let challenge = Challenge::parse(token).unwrap();
        assert_eq!(challenge.realms, vec!["zk-sasl-md5".to_owned()]);
        assert!(challenge.utf8);
        let answer = respond(&challenge, "alice", "alice-secret", "c", DIGEST_URI).unwrap();
        let text = String::from_utf8(answer.token).unwrap();
        assert!(
            text.contains("digest-uri=\"zookeeper/zk-sasl-md5\""),
            "{text}"
        );
        assert!(text.contains("realm=\"zk-sasl-md5\""), "{text}");
    }

    #[test]
    fn quoted_strings_spaces_and_empty_elements() {
        let parsed = directives(
            b" ,realm = \"a\\\"b\\\\c, d\" ,, Nonce=\"n\",\tqop=\"auth-int, auth\" ,stale=true,",
        )
        .unwrap();
        assert_eq!(
            parsed,
            vec![
                ("realm".to_owned(), b"a\"b\\c, d".to_vec()),
                ("nonce".to_owned(), b"n".to_vec()),
                ("qop".to_owned(), b"auth-int, auth".to_vec()),
                ("stale".to_owned(), b"true".to_vec()),
            ]
        );
        assert_eq!(directives(b"").unwrap(), vec![]);
    }

    #[test]
    fn malformed_tokens_are_errors() {
        for token in [
            &b"nonce=\"abc"[..],
            b"nonce=\"abc\\",
            b"nonce",
            b"nonce=",
            b"nonce=\"a\"x",
            b"=x",
            b"\"x\"",
            b"a=b c=d",
            b"nonce=\x00",
        ] {
            assert!(
                directives(token).is_err(),
                "{:?}",
                String::from_utf8_lossy(token)
            );
        }
        assert!(directives(&vec![b'a'; MAX_TOKEN + 1]).is_err());
    }

    #[test]
    fn challenges_that_cannot_be_answered() {
        let cases: [(&[u8], &str); 7] = [
            (b"realm=\"r\",qop=\"auth\",algorithm=md5-sess", "no nonce"),
            (b"nonce=\"\",algorithm=md5-sess", "no nonce"),
            (
                b"nonce=\"n\",qop=\"auth-int,auth-conf\",algorithm=md5-sess",
                "qop=auth",
            ),
            (b"nonce=\"n\",nonce=\"m\",algorithm=md5-sess", "twice"),
            (b"nonce=\"n\",algorithm=md5", "algorithm"),
            (b"nonce=\"n\"", "algorithm"),
            (b"nonce=\"n\",algorithm=md5-sess,charset=latin1", "charset"),
        ];
        for (token, why) in cases {
            let err = Challenge::parse(token).unwrap_err();
            assert!(
                err.contains(why),
                "{:?}: {err}",
                String::from_utf8_lossy(token)
            );
        }
        assert!(Challenge::parse(b"").is_err());
        assert!(Challenge::parse(b"garbage").is_err());
    }

    #[test]
    fn a_challenge_without_qop_or_realm_offers_auth_with_an_empty_realm() {
        let challenge = Challenge::parse(b"nonce=\"n\",algorithm=md5-sess,unknown=\"x\"").unwrap();
        assert!(challenge.realms.is_empty() && !challenge.utf8);
        let answer = respond(&challenge, "u", "p", "c", DIGEST_URI).unwrap();
        let sent = directives(&answer.token).unwrap();
        assert!(!sent.iter().any(|(n, _)| n == "realm" || n == "charset"));
    }

    #[test]
    fn escapes_survive_the_response_token() {
        let challenge =
            Challenge::parse(b"realm=\"r\\\"1\",nonce=\"n\\\\\\\"\",algorithm=md5-sess").unwrap();
        assert_eq!(challenge.nonce, b"n\\\"");
        let answer = respond(&challenge, "a\"b", "p", "c", DIGEST_URI).unwrap();
        let sent = directives(&answer.token).unwrap();
        let get = |name: &str| sent.iter().find(|(n, _)| n == name).unwrap().1.clone();
        assert_eq!(get("username"), b"a\"b");
        assert_eq!(get("realm"), b"r\"1");
        assert_eq!(get("nonce"), b"n\\\"");
    }

    #[test]
    fn names_are_hashed_in_latin1_when_they_fit_else_utf8() {
        assert_eq!(hashed("é", true).unwrap(), vec![0xe9]);
        assert_eq!(hashed("é", false).unwrap(), vec![0xe9]);
        assert_eq!(hashed("€", true).unwrap(), "€".as_bytes());
        assert!(hashed("€", false).is_none());
        let latin1_only = Challenge::parse(b"nonce=\"n\",algorithm=md5-sess").unwrap();
        assert!(respond(&latin1_only, "€", "p", "c", DIGEST_URI).is_err());
        let answer = respond(&latin1_only, "é", "p", "c", DIGEST_URI).unwrap();
        assert!(answer.token.windows(3).any(|w| w == b"\"\xe9\""));
    }

    /// How the fake server of [`exchange`] ends the exchange.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Ending {
        Proves,
        WrongRspauth,
        NoRspauth,
        WrongXid,
        Error(i32),
        HangsUp,
    }

    /// Runs `authenticate` as alice against a fake ZooKeeper that knows `password` for her and
    /// ends as told; returns the client's outcome and the xids and ops the server saw.
    fn exchange(password: &str, ending: Ending) -> (Result<(), AttemptError>, Vec<(i32, i32)>) {
        use super::super::link;
        use std::net::TcpListener;
        use std::time::Duration;

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let known = password.to_owned();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut link = link::plain(stream).unwrap();
            let mut frames = Frames::new(1 << 20);
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut seen = Vec::new();
            let mut read = |link: &mut Link| {
                let frame = attempt::read_frame(link, &mut frames, deadline).unwrap();
                let mut r = Reader::new(&frame);
                let (xid, op) = (r.int().unwrap(), r.int().unwrap());
                seen.push((xid, op));
                (xid, r.buffer().unwrap().to_vec())
            };
            let reply = |link: &mut Link, xid: i32, err: i32, token: Option<&[u8]>| {
                let mut w = Writer::frame();
                w.int(xid).long(0).int(err);
                match token {
                    Some(t) => w.buffer(t),
                    None => w.int(-1),
                };
                link.sink.send(&w.finish()).unwrap();
            };
            let (xid, first) = read(&mut link);
            assert!(first.is_empty());
            reply(
                &mut link,
                xid,
                0,
                Some(b"realm=\"zk-sasl-md5\",nonce=\"N0nce\",charset=utf-8,algorithm=md5-sess"),
            );
            let (xid, response) = read(&mut link);
            if ending == Ending::HangsUp {
                return seen;
            }
            let sent = directives(&response).unwrap();
            let get = |name: &str| sent.iter().find(|(n, _)| n == name).unwrap().1.clone();
            let digest = Digest {
                user: get("username"),
                realm: get("realm"),
                password: known.into_bytes(),
                nonce: b"N0nce",
                cnonce: &get("cnonce"),
                digest_uri: &get("digest-uri"),
            };
            if get("response") != digest.response().as_bytes() {
                reply(&mut link, xid, SESSION_CLOSED_REQUIRE_SASL_AUTH, None);
                return seen;
            }
            let proof = format!("rspauth={}", digest.rspauth());
            match ending {
                Ending::Proves => reply(&mut link, xid, 0, Some(proof.as_bytes())),
                Ending::WrongRspauth => reply(&mut link, xid, 0, Some(b"rspauth=0123")),
                Ending::NoRspauth => reply(&mut link, xid, 0, Some(b"")),
                Ending::WrongXid => reply(&mut link, -1, 0, Some(proof.as_bytes())),
                Ending::Error(err) => reply(&mut link, xid, err, None),
                Ending::HangsUp => unreachable!(),
            }
            seen
        });
        let stream = link::tcp(addr, Duration::from_secs(2)).unwrap();
        let mut link = link::plain(stream).unwrap();
        let mut frames = Frames::new(1 << 20);
        let deadline = Instant::now() + Duration::from_secs(5);
        let outcome = authenticate(
            &mut link,
            &mut frames,
            "alice",
            "alice-secret",
            "fake",
            deadline,
        );
        link.closer.close();
        (outcome, server.join().unwrap())
    }

    #[test]
    fn authenticates_in_two_sasl_packets_with_fresh_xids() {
        let (outcome, seen) = exchange("alice-secret", Ending::Proves);
        outcome.unwrap();
        assert_eq!(seen, vec![(1, op::SASL), (2, op::SASL)]);
    }

    #[test]
    fn refusals_and_broken_servers() {
        // What the client made of it: refused, broken reply, or a lost connection.
        let verdict = |outcome: Result<(), AttemptError>| match outcome {
            Err(AttemptError::AuthFailed) => "refused",
            Err(AttemptError::Io(e)) if e.kind() == io::ErrorKind::InvalidData => "broken",
            Err(AttemptError::Io(_)) => "lost",
            other => panic!("{other:?}"),
        };
        for (password, ending, expected) in [
            ("wrong", Ending::Proves, "refused"),
            ("alice-secret", Ending::WrongRspauth, "refused"),
            ("alice-secret", Ending::NoRspauth, "refused"),
            ("alice-secret", Ending::Error(AUTH_FAILED), "refused"),
            ("alice-secret", Ending::Error(-5), "broken"),
            ("alice-secret", Ending::WrongXid, "broken"),
            ("alice-secret", Ending::HangsUp, "lost"),
        ] {
            let (outcome, _) = exchange(password, ending);
            assert_eq!(verdict(outcome), expected, "{password} {ending:?}");
        }
    }

    #[test]
    fn rspauth_is_found_among_other_directives() {
        assert_eq!(rspauth(b"x=1, rspauth=abc").unwrap(), b"abc");
        assert_eq!(rspauth(b"rspauth=\"abc\"").unwrap(), b"abc");
        assert!(rspauth(b"").is_none());
        assert!(rspauth(b"rspauth").is_none());
    }
}

//! The subject of a client certificate as ZooKeeper's x509 authentication names it: the
//! server's id for a TLS client is its certificate's subject in RFC 2253 form (Java's
//! `X500Principal.getName()`), e.g. `CN=svc-a,OU=ops,O=Acme`, and ACLs name it that way
//! (`x509:CN=svc-a,...`). Errors show it so that an operator sees which id an ACL lacks.
//!
//! rustls's own parser (webpki) finds the subject; this reads its attributes and the common
//! string types. Malformed input gives `None`, never a panic.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// The subject of the first certificate in `chain_pem`, in RFC 2253 form.
pub(crate) fn subject_of_pem(chain_pem: &str) -> Option<String> {
    let cert = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .next()?
        .ok()?;
    subject_of(&cert)
}

/// The subject of a DER certificate, in RFC 2253 form; `None` if it does not parse.
pub(crate) fn subject_of(der: &[u8]) -> Option<String> {
    let der = CertificateDer::from(der);
    let cert = webpki::EndEntityCert::try_from(&der).ok()?;
    name(cert.subject())
}

const OID: u8 = 0x06;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;

/// A DER tag-length-value reader.
struct Tlv;

/// One DER element.
struct Element<'a> {
    tag: u8,
    contents: &'a [u8],
    /// Tag, length and contents.
    whole: &'a [u8],
}

impl Tlv {
    /// The contents of the element at the start of `input`, which must carry `tag`, and what
    /// follows it.
    fn read(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
        let (&found, rest) = input.split_first()?;
        let (contents, rest) = Self::contents(rest)?;
        (found == tag).then_some((contents, rest))
    }

    /// The element at the start of `input`, whatever its tag.
    fn any(input: &[u8]) -> Option<Element<'_>> {
        let (&tag, rest) = input.split_first()?;
        let (contents, after) = Self::contents(rest)?;
        let whole = &input[..input.len() - after.len()];
        Some(Element {
            tag,
            contents,
            whole,
        })
    }

    fn contents(input: &[u8]) -> Option<(&[u8], &[u8])> {
        let (&first, mut rest) = input.split_first()?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7F);
            if count == 0 || count > 4 || rest.len() < count {
                return None;
            }
            let (bytes, after) = rest.split_at(count);
            rest = after;
            bytes
                .iter()
                .fold(0usize, |len, &b| (len << 8) | usize::from(b))
        };
        (len <= rest.len()).then(|| rest.split_at(len))
    }
}

/// A `Name` (a SEQUENCE OF relative distinguished names) in RFC 2253 form: the last RDN
/// first, RDNs separated by `,`, the attributes of one RDN by `+`.
fn name(mut rdns: &[u8]) -> Option<String> {
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (set, rest) = Tlv::read(rdns, SET)?;
        rdns = rest;
        let mut attributes = Vec::new();
        let mut set = set;
        while !set.is_empty() {
            let (pair, rest) = Tlv::read(set, SEQUENCE)?;
            set = rest;
            let (oid, value) = Tlv::read(pair, OID)?;
            attributes.push(attribute(oid, value)?);
        }
        parts.push(attributes.join("+"));
    }
    parts.reverse();
    Some(parts.join(","))
}

/// One `type=value`, with RFC 2253's keywords and escapes, or `oid=#hex` for what it has no
/// keyword or string form for (as Java prints them).
fn attribute(oid: &[u8], value: &[u8]) -> Option<String> {
    let Element {
        tag,
        contents,
        whole,
    } = Tlv::any(value)?;
    let keyword = match oid {
        [0x55, 0x04, 0x03] => Some("CN"),
        [0x55, 0x04, 0x06] => Some("C"),
        [0x55, 0x04, 0x07] => Some("L"),
        [0x55, 0x04, 0x08] => Some("ST"),
        [0x55, 0x04, 0x09] => Some("STREET"),
        [0x55, 0x04, 0x0A] => Some("O"),
        [0x55, 0x04, 0x0B] => Some("OU"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xF2, 0x2C, 0x64, 0x01, 0x19] => Some("DC"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xF2, 0x2C, 0x64, 0x01, 0x01] => Some("UID"),
        _ => None,
    };
    let text = match tag {
        // UTF8String, PrintableString, IA5String.
        0x0C | 0x13 | 0x16 => std::str::from_utf8(contents).ok().map(str::to_owned),
        // BMPString: UTF-16BE.
        0x1E if contents.len() % 2 == 0 => {
            let units = contents
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]));
            char::decode_utf16(units)
                .collect::<Result<String, _>>()
                .ok()
        }
        _ => None,
    };
    Some(match (keyword, text) {
        (Some(keyword), Some(text)) => format!("{keyword}={}", escape(&text)),
        _ => format!(
            "{}=#{}",
            keyword.map_or_else(|| dotted(oid), str::to_owned),
            hex(whole)
        ),
    })
}

/// RFC 2253 section 2.4: `,+"\<>;` escaped anywhere, `#` and space at the start and space at
/// the end.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// An OBJECT IDENTIFIER's contents in dotted form.
fn dotted(oid: &[u8]) -> String {
    let mut arcs = Vec::new();
    let mut arc: u64 = 0;
    for &byte in oid {
        arc = (arc << 7) | u64::from(byte & 0x7F);
        if byte & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (arc / 40).min(2);
                arcs.push(first);
                arcs.push(arc - first * 40);
            } else {
                arcs.push(arc);
            }
            arc = 0;
        }
    }
    arcs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::super::openssl::Openssl;
    use super::*;

    /// A self-signed certificate for `subject` (openssl's `-subj` form) and what openssl
    /// itself prints as its RFC 2253 subject; `None` without openssl.
    fn certificate(subject: &str) -> Option<(String, String)> {
        let openssl = Openssl::new("subject")?;
        let run = |args: &[&str]| openssl.run(args);
        run(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
            "-days",
            "1",
            "-multivalue-rdn",
            "-utf8",
            "-subj",
            subject,
        ]);
        let printed = run(&[
            "x509", "-in", "cert.pem", "-noout", "-subject", "-nameopt", "RFC2253",
        ]);
        let pem = openssl.read("cert.pem");
        let printed = printed.trim().trim_start_matches("subject=").to_owned();
        Some((pem, printed))
    }

    #[test]
    fn subjects_read_as_openssl_prints_them() {
        for subject in [
            "/CN=svc-a",
            "/C=DE/ST=Berlin/L=Mitte/O=Acme, Inc./OU=ops/CN=svc-a",
            "/DC=org/DC=example/UID=jdoe/CN= lead#1 ;<x>\"\\\\q",
        ] {
            let Some((pem, printed)) = certificate(subject) else {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "no openssl to make test certificates"
                );
                eprintln!("SKIPPED: no openssl to make test certificates");
                return;
            };
            assert_eq!(subject_of_pem(&pem).as_deref(), Some(printed.as_str()));
        }
    }

    #[test]
    fn non_ascii_prints_as_itself() {
        // As Java prints it; openssl's RFC 2253 output escapes each byte as `\XX` instead.
        let Some((pem, _)) = certificate("/O=Zürich Ü/CN=ünïcode") else {
            return;
        };
        assert_eq!(
            subject_of_pem(&pem).as_deref(),
            Some("CN=ünïcode,O=Zürich Ü")
        );
    }

    #[test]
    fn a_multi_valued_rdn_keeps_its_encoded_order() {
        // DER sorts a SET OF, and Java prints an RDN's attributes in that order (openssl's
        // RFC 2253 output reverses them with the RDNs, so it is no oracle here).
        let Some((pem, _)) = certificate("/O=Acme/OU=ops+OU=dev/CN=svc-a") else {
            return;
        };
        assert_eq!(
            subject_of_pem(&pem).as_deref(),
            Some("CN=svc-a,OU=dev+OU=ops,O=Acme")
        );
    }

    #[test]
    fn unknown_attributes_print_as_hex_under_their_oid() {
        // emailAddress (1.2.840.113549.1.9.1) has no RFC 2253 keyword: Java prints
        // `1.2.840.113549.1.9.1=#16...`.
        let oid = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x01];
        let value = [0x16, 0x03, b'a', b'@', b'b'];
        assert_eq!(
            attribute(&oid, &value).unwrap(),
            "1.2.840.113549.1.9.1=#1603614062"
        );
    }

    #[test]
    fn garbage_is_none_not_a_panic() {
        assert_eq!(subject_of(&[]), None);
        assert_eq!(subject_of(&[0x30, 0x84, 0xFF, 0xFF, 0xFF, 0xFF]), None);
        assert_eq!(subject_of(&[0x30, 0x03, 0x30, 0x81]), None);
        assert_eq!(subject_of_pem("not a certificate"), None);
        // Every prefix of a real certificate.
        if let Some((pem, _)) = certificate("/CN=x/O=y") {
            let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
            for end in 0..der.len() {
                let _ = subject_of(&der[..end]);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = subject_of(&bytes);
            let mut cert = vec![0x30, 0x82, 0x01, 0x00, 0x30, 0x81, 0xF0];
            cert.extend_from_slice(&bytes);
            let _ = subject_of(&cert);
        }
    }
}

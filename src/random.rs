//! Random identifiers: 16 bytes from the operating system's generator (`getrandom`), formatted
//! as a version-4 UUID where one is shown. They name our nodes (Curator's protected prefix
//! `_c_<uuid>-`, which finds a node again after a `create` whose reply was lost), make the SASL
//! client nonce, and pick the first host of an ensemble's rotation.

/// A random UUID, version 4 (RFC 9562): 122 random bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Uuid([u8; 16]);

impl Uuid {
    /// A fresh random UUID.
    ///
    /// # Panics
    ///
    /// If the operating system gives no random bytes (neither the `getrandom` system call nor
    /// `/dev/urandom` works), as the `uuid` crate zklock used before did.
    pub(crate) fn new_v4() -> Uuid {
        let mut bytes = [0u8; 16];
        if let Err(err) = getrandom::getrandom(&mut bytes) {
            panic!("zklock: the operating system gave no random bytes: {err}");
        }
        Uuid::v4_from(bytes)
    }

    /// `bytes` with the version (4) and variant (RFC 9562) bits set.
    fn v4_from(mut bytes: [u8; 16]) -> Uuid {
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        Uuid(bytes)
    }

    /// The id whose 16 bytes are `n`, big-endian: deterministic ids for the simulation.
    #[cfg(any(test, feature = "simulation"))]
    pub(crate) fn from_u128(n: u128) -> Uuid {
        Uuid(n.to_be_bytes())
    }

    #[cfg(test)]
    pub(crate) fn nil() -> Uuid {
        Uuid([0; 16])
    }

    pub(crate) fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// 32 lowercase hex digits.
    pub(crate) fn simple(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The usual form, `8-4-4-4-12` lowercase hex digits.
    pub(crate) fn hyphenated(&self) -> String {
        let hex = self.simple();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Uuid;

    #[test]
    fn formats_as_the_uuid_crate_does() {
        let bytes: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(5));
        let ours = Uuid::v4_from(bytes);
        let theirs = uuid::Uuid::from_bytes(*ours.as_bytes());
        assert_eq!(ours.hyphenated(), theirs.hyphenated().to_string());
        assert_eq!(ours.simple(), theirs.simple().to_string());
        assert_eq!(theirs.get_version_num(), 4);
        assert_eq!(theirs.get_variant(), uuid::Variant::RFC4122);
    }

    #[test]
    fn fresh_ids_are_version_4_and_differ() {
        let ids: Vec<Uuid> = (0..64).map(|_| Uuid::new_v4()).collect();
        for id in &ids {
            let text = id.hyphenated();
            assert_eq!(text.len(), 36, "{text}");
            assert_eq!(&text[14..15], "4", "{text}");
            assert!("89ab".contains(&text[19..20]), "{text}");
            let parsed = uuid::Uuid::parse_str(&text).unwrap();
            assert_eq!(parsed.get_version_num(), 4, "{text}");
        }
        let mut distinct = ids.clone();
        distinct.sort_by_key(|id| *id.as_bytes());
        distinct.dedup();
        assert_eq!(distinct.len(), ids.len());
    }
}

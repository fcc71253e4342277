//! The records of `zookeeper.jute`, each written once with its encoder and decoder.

use crate::jute::{Decoded, Reader, Record, Writer};

/// A field type of a record: how it is written and read.
pub trait Field: Sized {
    /// Appends the field.
    fn put(&self, w: &mut Writer);
    /// Reads the field.
    ///
    /// # Errors
    /// When the bytes do not hold it.
    fn get(r: &mut Reader<'_>) -> Decoded<Self>;
}

impl Field for i32 {
    fn put(&self, w: &mut Writer) {
        w.int(*self);
    }
    fn get(r: &mut Reader<'_>) -> Decoded<Self> {
        r.int()
    }
}

impl Field for i64 {
    fn put(&self, w: &mut Writer) {
        w.long(*self);
    }
    fn get(r: &mut Reader<'_>) -> Decoded<Self> {
        r.long()
    }
}

impl Field for bool {
    fn put(&self, w: &mut Writer) {
        w.boolean(*self);
    }
    fn get(r: &mut Reader<'_>) -> Decoded<Self> {
        r.boolean()
    }
}

impl Field for String {
    fn put(&self, w: &mut Writer) {
        w.string(self);
    }
    fn get(r: &mut Reader<'_>) -> Decoded<Self> {
        r.string()
    }
}

/// A jute `buffer`.
impl Field for Vec<u8> {
    fn put(&self, w: &mut Writer) {
        w.buffer(self);
    }
    fn get(r: &mut Reader<'_>) -> Decoded<Self> {
        Ok(r.buffer()?.to_vec())
    }
}

/// A jute `vector<ustring>`.
impl Field for Vec<String> {
    fn put(&self, w: &mut Writer) {
        w.strings(self);
    }
    fn get(r: &mut Reader<'_>) -> Decoded<Self> {
        r.strings()
    }
}

/// A jute `vector<ACL>`.
impl Field for Vec<Acl> {
    fn put(&self, w: &mut Writer) {
        w.int(self.len() as i32);
        for acl in self {
            acl.encode(w);
        }
    }
    fn get(r: &mut Reader<'_>) -> Decoded<Self> {
        r.records(12)
    }
}

/// A jute `vector<ClientInfo>`.
impl Field for Vec<ClientInfo> {
    fn put(&self, w: &mut Writer) {
        w.int(self.len() as i32);
        for info in self {
            info.encode(w);
        }
    }
    fn get(r: &mut Reader<'_>) -> Decoded<Self> {
        r.records(8)
    }
}

macro_rules! record {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
        pub struct $name {
            $($(#[$fm])* pub $field: $ty,)*
        }

        impl Record for $name {
            fn encode(&self, w: &mut Writer) {
                let _ = &w;
                $(Field::put(&self.$field, w);)*
            }
            fn decode(r: &mut Reader<'_>) -> Decoded<Self> {
                let _ = &r;
                Ok($name { $($field: Field::get(r)?,)* })
            }
        }

        impl Field for $name {
            fn put(&self, w: &mut Writer) {
                self.encode(w);
            }
            fn get(r: &mut Reader<'_>) -> Decoded<Self> {
                Self::decode(r)
            }
        }
    };
}

record! {
    /// An identity: a scheme and an id in it (`world:anyone`, `digest:user:hash`, `ip:addr`).
    pub struct Id {
        /// The scheme.
        pub scheme: String,
        /// The id, as the scheme spells it.
        pub id: String,
    }
}

record! {
    /// One ACL entry: permissions granted to an identity.
    pub struct Acl {
        /// Permission bits ([`crate::perms`]).
        pub perms: i32,
        /// Whom they are granted to.
        pub id: Id,
    }
}

impl Acl {
    /// An entry of `perms` for `scheme:id`.
    pub fn new(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        }
    }

    /// `world:anyone` with every permission (`OPEN_ACL_UNSAFE`).
    pub fn open() -> Vec<Acl> {
        vec![Acl::new(crate::perms::ALL, "world", "anyone")]
    }
}

record! {
    /// A node's stat, as clients see it.
    #[derive(Copy)]
    pub struct Stat {
        /// The zxid of the create.
        pub czxid: i64,
        /// The zxid of the last data change (or the create).
        pub mzxid: i64,
        /// When created, ms since the epoch.
        pub ctime: i64,
        /// When last modified, ms since the epoch.
        pub mtime: i64,
        /// The data version.
        pub version: i32,
        /// The child version.
        pub cversion: i32,
        /// The ACL version.
        pub aversion: i32,
        /// The session owning an ephemeral, 0 otherwise.
        pub ephemeral_owner: i64,
        /// The data's length.
        pub data_length: i32,
        /// How many children.
        pub num_children: i32,
        /// The zxid of the last change to the children.
        pub pzxid: i64,
    }
}

record! {
    /// One authenticated identity of a session (`whoAmI`'s answer).
    pub struct ClientInfo {
        /// The scheme.
        pub auth_scheme: String,
        /// The user in it.
        pub user: String,
    }
}

/// The first frame of a connection: a new session (id 0) or the re-establishment of one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ConnectRequest {
    /// The protocol version (0).
    pub protocol_version: i32,
    /// The last zxid the client saw.
    pub last_zxid_seen: i64,
    /// The session timeout asked for, ms.
    pub timeout: i32,
    /// The session to resume, or 0 for a new one.
    pub session_id: i64,
    /// The session's password (16 bytes), or zeroes for a new one.
    pub passwd: Vec<u8>,
    /// The read-only flag, when sent (old clients omit the byte; since 3.9.3 the server
    /// echoes it only if sent).
    pub read_only: Option<bool>,
}

impl Record for ConnectRequest {
    fn encode(&self, w: &mut Writer) {
        w.int(self.protocol_version)
            .long(self.last_zxid_seen)
            .int(self.timeout)
            .long(self.session_id)
            .buffer(&self.passwd);
        if let Some(ro) = self.read_only {
            w.boolean(ro);
        }
    }
    fn decode(r: &mut Reader<'_>) -> Decoded<Self> {
        let mut req = ConnectRequest {
            protocol_version: r.int()?,
            last_zxid_seen: r.long()?,
            timeout: r.int()?,
            session_id: r.long()?,
            passwd: r.buffer()?.to_vec(),
            read_only: None,
        };
        if r.remaining() > 0 {
            req.read_only = Some(r.boolean()?);
        }
        Ok(req)
    }
}

/// The server's answer to a [`ConnectRequest`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ConnectResponse {
    /// The protocol version (0).
    pub protocol_version: i32,
    /// The negotiated session timeout, ms; 0 for a session that is unknown or expired.
    pub timeout: i32,
    /// The session id.
    pub session_id: i64,
    /// The session's password.
    pub passwd: Vec<u8>,
    /// The read-only flag, when written.
    pub read_only: Option<bool>,
}

impl Record for ConnectResponse {
    fn encode(&self, w: &mut Writer) {
        w.int(self.protocol_version)
            .int(self.timeout)
            .long(self.session_id)
            .buffer(&self.passwd);
        if let Some(ro) = self.read_only {
            w.boolean(ro);
        }
    }
    fn decode(r: &mut Reader<'_>) -> Decoded<Self> {
        let mut resp = ConnectResponse {
            protocol_version: r.int()?,
            timeout: r.int()?,
            session_id: r.long()?,
            passwd: r.buffer()?.to_vec(),
            read_only: None,
        };
        if r.remaining() > 0 {
            resp.read_only = Some(r.boolean()?);
        }
        Ok(resp)
    }
}

record! {
    /// The header of every request after the handshake.
    #[derive(Copy)]
    pub struct RequestHeader {
        /// The request's number (or a special xid, [`crate::xid`]).
        pub xid: i32,
        /// The op code ([`crate::op`]).
        pub op: i32,
    }
}

record! {
    /// The header of every reply and notification.
    #[derive(Copy)]
    pub struct ReplyHeader {
        /// The request's xid (or a special xid).
        pub xid: i32,
        /// The server's last zxid (a notification's: the zxid that triggered it).
        pub zxid: i64,
        /// The error code ([`crate::code`]); 0 for success.
        pub err: i32,
    }
}

record! {
    /// The header of each op in a multi request and each result in a multi reply.
    #[derive(Copy)]
    pub struct MultiHeader {
        /// The op code (-1 for the end, or an error result).
        pub op: i32,
        /// Whether this is the end marker.
        pub done: bool,
        /// The error code of an error result; -1 in requests.
        pub err: i32,
    }
}

record! {
    /// `addAuth`: credentials for a scheme.
    pub struct AuthPacket {
        /// Unused (0).
        pub kind: i32,
        /// The scheme (`digest`).
        pub scheme: String,
        /// The credentials (`user:password` for digest).
        pub auth: Vec<u8>,
    }
}

record! {
    /// `create`, `create2`, `createContainer`.
    pub struct CreateRequest {
        /// The node's path (a sequential node's prefix).
        pub path: String,
        /// Its data.
        pub data: Vec<u8>,
        /// Its ACL.
        pub acl: Vec<Acl>,
        /// The create mode ([`crate::create_mode`]).
        pub flags: i32,
    }
}

record! {
    /// `createTTL`.
    pub struct CreateTtlRequest {
        /// The node's path (a sequential node's prefix).
        pub path: String,
        /// Its data.
        pub data: Vec<u8>,
        /// Its ACL.
        pub acl: Vec<Acl>,
        /// The create mode (5 or 6).
        pub flags: i32,
        /// The time to live, ms.
        pub ttl: i64,
    }
}

record! {
    /// `create`'s answer.
    pub struct CreateResponse {
        /// The created node's path.
        pub path: String,
    }
}

record! {
    /// `create2`'s (and `createContainer`'s, `createTTL`'s) answer.
    pub struct Create2Response {
        /// The created node's path.
        pub path: String,
        /// Its stat.
        pub stat: Stat,
    }
}

record! {
    /// `delete`.
    pub struct DeleteRequest {
        /// The node.
        pub path: String,
        /// The expected version, -1 for any.
        pub version: i32,
    }
}

record! {
    /// `exists`, `getData`, `getChildren`, `getChildren2`: a path and whether to watch it.
    pub struct PathWatchRequest {
        /// The node.
        pub path: String,
        /// Whether to leave a watch.
        pub watch: bool,
    }
}

record! {
    /// A request of a path alone: `sync`, `getACL`, `getAllChildrenNumber`, `getEphemerals`.
    pub struct PathRequest {
        /// The node (for `getEphemerals`: a prefix of paths).
        pub path: String,
    }
}

record! {
    /// `setData`.
    pub struct SetDataRequest {
        /// The node.
        pub path: String,
        /// The new data.
        pub data: Vec<u8>,
        /// The expected version, -1 for any.
        pub version: i32,
    }
}

record! {
    /// An answer of a stat alone: `exists`, `setData`, `setACL`.
    #[derive(Copy)]
    pub struct StatResponse {
        /// The node's stat.
        pub stat: Stat,
    }
}

record! {
    /// `getData`'s answer.
    pub struct GetDataResponse {
        /// The data.
        pub data: Vec<u8>,
        /// The stat.
        pub stat: Stat,
    }
}

record! {
    /// `getChildren`'s answer.
    pub struct GetChildrenResponse {
        /// The children's names.
        pub children: Vec<String>,
    }
}

record! {
    /// `getChildren2`'s answer.
    pub struct GetChildren2Response {
        /// The children's names.
        pub children: Vec<String>,
        /// The parent's stat.
        pub stat: Stat,
    }
}

record! {
    /// `check`.
    pub struct CheckVersionRequest {
        /// The node.
        pub path: String,
        /// The version it must have.
        pub version: i32,
    }
}

record! {
    /// `getACL`'s answer.
    pub struct GetAclResponse {
        /// The ACL.
        pub acl: Vec<Acl>,
        /// The stat.
        pub stat: Stat,
    }
}

record! {
    /// `setACL`.
    pub struct SetAclRequest {
        /// The node.
        pub path: String,
        /// The new ACL.
        pub acl: Vec<Acl>,
        /// The expected ACL version (aversion), -1 for any.
        pub version: i32,
    }
}

record! {
    /// `getAllChildrenNumber`'s answer.
    #[derive(Copy)]
    pub struct GetAllChildrenNumberResponse {
        /// How many nodes under the path, at any depth.
        pub total_number: i32,
    }
}

record! {
    /// `getEphemerals`'s answer.
    pub struct GetEphemeralsResponse {
        /// The session's ephemerals under the prefix.
        pub ephemerals: Vec<String>,
    }
}

record! {
    /// `setWatches`: the watches of a session re-armed on a new connection.
    pub struct SetWatches {
        /// The last zxid the client saw: a watched node changed since fires at once.
        pub relative_zxid: i64,
        /// Data watches.
        pub data_watches: Vec<String>,
        /// Exist watches.
        pub exist_watches: Vec<String>,
        /// Child watches.
        pub child_watches: Vec<String>,
    }
}

record! {
    /// `setWatches2`: [`SetWatches`] with persistent watches.
    pub struct SetWatches2 {
        /// The last zxid the client saw.
        pub relative_zxid: i64,
        /// Data watches.
        pub data_watches: Vec<String>,
        /// Exist watches.
        pub exist_watches: Vec<String>,
        /// Child watches.
        pub child_watches: Vec<String>,
        /// Persistent watches.
        pub persistent_watches: Vec<String>,
        /// Persistent recursive watches.
        pub persistent_recursive_watches: Vec<String>,
    }
}

record! {
    /// `addWatch`.
    pub struct AddWatchRequest {
        /// The node.
        pub path: String,
        /// The mode ([`crate::add_watch_mode`]).
        pub mode: i32,
    }
}

record! {
    /// `removeWatches` and `checkWatches`.
    pub struct WatchesRequest {
        /// The node.
        pub path: String,
        /// The watch type ([`crate::watcher_type`]).
        pub kind: i32,
    }
}

record! {
    /// A notification's body.
    pub struct WatcherEvent {
        /// The event type ([`crate::event_type`]).
        pub kind: i32,
        /// The keeper state ([`crate::keeper_state`]).
        pub state: i32,
        /// The node's path.
        pub path: String,
    }
}

record! {
    /// An error result in a multi reply.
    #[derive(Copy)]
    pub struct ErrorResponse {
        /// The error code.
        pub err: i32,
    }
}

record! {
    /// `whoAmI`'s answer.
    pub struct WhoAmIResponse {
        /// The session's identities.
        pub client_info: Vec<ClientInfo>,
    }
}

record! {
    /// `reconfig` (decoded only to answer it).
    pub struct ReconfigRequest {
        /// Joining servers.
        pub joining_servers: String,
        /// Leaving servers.
        pub leaving_servers: String,
        /// New members.
        pub new_members: String,
        /// The current config id.
        pub cur_config_id: i64,
    }
}

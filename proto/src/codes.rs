//! The numbers of the protocol: op codes (`ZooDefs.OpCode`), special xids, error codes
//! (`KeeperException.Code`), permissions, create modes, watch event types and states.

/// Op codes (`ZooDefs.OpCode`).
pub mod op {
    /// The op of a notification (never sent as a request).
    pub const NOTIFICATION: i32 = 0;
    /// `create`: answers with the path.
    pub const CREATE: i32 = 1;
    /// `delete`.
    pub const DELETE: i32 = 2;
    /// `exists`.
    pub const EXISTS: i32 = 3;
    /// `getData`.
    pub const GET_DATA: i32 = 4;
    /// `setData`.
    pub const SET_DATA: i32 = 5;
    /// `getACL`.
    pub const GET_ACL: i32 = 6;
    /// `setACL`.
    pub const SET_ACL: i32 = 7;
    /// `getChildren`.
    pub const GET_CHILDREN: i32 = 8;
    /// `sync`.
    pub const SYNC: i32 = 9;
    /// `ping`.
    pub const PING: i32 = 11;
    /// `getChildren2`: children and the parent's stat.
    pub const GET_CHILDREN2: i32 = 12;
    /// `check` (a version check, in a multi).
    pub const CHECK: i32 = 13;
    /// `multi`: a transaction.
    pub const MULTI: i32 = 14;
    /// `create2`: answers with path and stat.
    pub const CREATE2: i32 = 15;
    /// `reconfig` (not served by a standalone server).
    pub const RECONFIG: i32 = 16;
    /// `checkWatches`.
    pub const CHECK_WATCHES: i32 = 17;
    /// `removeWatches`.
    pub const REMOVE_WATCHES: i32 = 18;
    /// `createContainer`.
    pub const CREATE_CONTAINER: i32 = 19;
    /// `deleteContainer` (the server's own, from its container sweep).
    pub const DELETE_CONTAINER: i32 = 20;
    /// `createTTL`.
    pub const CREATE_TTL: i32 = 21;
    /// `multiRead`: reads answered together.
    pub const MULTI_READ: i32 = 22;
    /// `auth` (addAuthInfo).
    pub const AUTH: i32 = 100;
    /// `setWatches`.
    pub const SET_WATCHES: i32 = 101;
    /// `sasl`.
    pub const SASL: i32 = 102;
    /// `getEphemerals`.
    pub const GET_EPHEMERALS: i32 = 103;
    /// `getAllChildrenNumber`.
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    /// `setWatches2`: setWatches with persistent watches.
    pub const SET_WATCHES2: i32 = 105;
    /// `addWatch`: a persistent or persistent-recursive watch.
    pub const ADD_WATCH: i32 = 106;
    /// `whoAmI`.
    pub const WHO_AM_I: i32 = 107;
    /// `createSession` (internal to the server).
    pub const CREATE_SESSION: i32 = -10;
    /// `closeSession`.
    pub const CLOSE_SESSION: i32 = -11;
    /// The op of a failed op's result in a multi reply.
    pub const ERROR: i32 = -1;
}

/// Xids outside the numbering of ordinary requests.
pub mod xid {
    /// A watch notification.
    pub const NOTIFICATION: i32 = -1;
    /// A ping and its reply.
    pub const PING: i32 = -2;
    /// An `auth` request and its reply.
    pub const AUTH: i32 = -4;
    /// A `setWatches`/`setWatches2` request and its reply.
    pub const SET_WATCHES: i32 = -8;
}

/// Error codes (`KeeperException.Code`).
pub mod code {
    /// Success.
    pub const OK: i32 = 0;
    /// A system error.
    pub const SYSTEM_ERROR: i32 = -1;
    /// The ops of a multi after the one that failed.
    pub const RUNTIME_INCONSISTENCY: i32 = -2;
    /// Data inconsistency.
    pub const DATA_INCONSISTENCY: i32 = -3;
    /// Connection loss.
    pub const CONNECTION_LOSS: i32 = -4;
    /// A request that did not (de)serialize.
    pub const MARSHALLING_ERROR: i32 = -5;
    /// An operation the server does not implement.
    pub const UNIMPLEMENTED: i32 = -6;
    /// Operation timeout.
    pub const OPERATION_TIMEOUT: i32 = -7;
    /// Bad arguments (a bad path, a bad watch mode).
    pub const BAD_ARGUMENTS: i32 = -8;
    /// Unknown session (internal).
    pub const UNKNOWN_SESSION: i32 = -12;
    /// API error.
    pub const API_ERROR: i32 = -100;
    /// No such node.
    pub const NO_NODE: i32 = -101;
    /// Not authorised by the node's ACL.
    pub const NO_AUTH: i32 = -102;
    /// Version mismatch.
    pub const BAD_VERSION: i32 = -103;
    /// Ephemeral nodes have no children.
    pub const NO_CHILDREN_FOR_EPHEMERALS: i32 = -108;
    /// The node exists.
    pub const NODE_EXISTS: i32 = -110;
    /// The node has children.
    pub const NOT_EMPTY: i32 = -111;
    /// The session expired.
    pub const SESSION_EXPIRED: i32 = -112;
    /// Invalid callback.
    pub const INVALID_CALLBACK: i32 = -113;
    /// An invalid ACL.
    pub const INVALID_ACL: i32 = -114;
    /// Authentication failed.
    pub const AUTH_FAILED: i32 = -115;
    /// The session moved to another server.
    pub const SESSION_MOVED: i32 = -118;
    /// A write to a read-only server.
    pub const NOT_READ_ONLY: i32 = -119;
    /// An ephemeral on a local session.
    pub const EPHEMERAL_ON_LOCAL_SESSION: i32 = -120;
    /// No such watcher (removeWatches/checkWatches).
    pub const NO_WATCHER: i32 = -121;
    /// Request timeout.
    pub const REQUEST_TIMEOUT: i32 = -122;
    /// Reconfiguration is disabled.
    pub const RECONFIG_DISABLED: i32 = -123;
    /// The session was closed because SASL is required.
    pub const SESSION_CLOSED_REQUIRE_SASL_AUTH: i32 = -124;
    /// A quota was exceeded.
    pub const QUOTA_EXCEEDED: i32 = -125;
    /// The request was throttled.
    pub const THROTTLED: i32 = -127;

    /// ZooKeeper's name for an error code (`KeeperException.Code`'s), or `None` for an unknown
    /// code.
    pub fn name(code: i32) -> Option<&'static str> {
        Some(match code {
            OK => "OK",
            SYSTEM_ERROR => "SYSTEMERROR",
            RUNTIME_INCONSISTENCY => "RUNTIMEINCONSISTENCY",
            DATA_INCONSISTENCY => "DATAINCONSISTENCY",
            CONNECTION_LOSS => "CONNECTIONLOSS",
            MARSHALLING_ERROR => "MARSHALLINGERROR",
            UNIMPLEMENTED => "UNIMPLEMENTED",
            OPERATION_TIMEOUT => "OPERATIONTIMEOUT",
            BAD_ARGUMENTS => "BADARGUMENTS",
            UNKNOWN_SESSION => "UNKNOWNSESSION",
            API_ERROR => "APIERROR",
            NO_NODE => "NONODE",
            NO_AUTH => "NOAUTH",
            BAD_VERSION => "BADVERSION",
            NO_CHILDREN_FOR_EPHEMERALS => "NOCHILDRENFOREPHEMERALS",
            NODE_EXISTS => "NODEEXISTS",
            NOT_EMPTY => "NOTEMPTY",
            SESSION_EXPIRED => "SESSIONEXPIRED",
            INVALID_CALLBACK => "INVALIDCALLBACK",
            INVALID_ACL => "INVALIDACL",
            AUTH_FAILED => "AUTHFAILED",
            SESSION_MOVED => "SESSIONMOVED",
            NOT_READ_ONLY => "NOTREADONLY",
            EPHEMERAL_ON_LOCAL_SESSION => "EPHEMERALONLOCALSESSION",
            NO_WATCHER => "NOWATCHER",
            REQUEST_TIMEOUT => "REQUESTTIMEOUT",
            RECONFIG_DISABLED => "RECONFIGDISABLED",
            SESSION_CLOSED_REQUIRE_SASL_AUTH => "SESSIONCLOSEDREQUIRESASLAUTH",
            QUOTA_EXCEEDED => "QUOTAEXCEEDED",
            THROTTLED => "THROTTLEDOP",
            _ => return None,
        })
    }
}

/// Permission bits (`ZooDefs.Perms`).
pub mod perms {
    /// Read data and list children.
    pub const READ: i32 = 1;
    /// Set data.
    pub const WRITE: i32 = 2;
    /// Create children.
    pub const CREATE: i32 = 4;
    /// Delete children.
    pub const DELETE: i32 = 8;
    /// Set the ACL.
    pub const ADMIN: i32 = 16;
    /// Everything.
    pub const ALL: i32 = 31;
}

/// Create flags (`CreateMode`'s numbers).
pub mod create_mode {
    /// A persistent node.
    pub const PERSISTENT: i32 = 0;
    /// An ephemeral node.
    pub const EPHEMERAL: i32 = 1;
    /// A persistent sequential node.
    pub const PERSISTENT_SEQUENTIAL: i32 = 2;
    /// An ephemeral sequential node.
    pub const EPHEMERAL_SEQUENTIAL: i32 = 3;
    /// A container.
    pub const CONTAINER: i32 = 4;
    /// A persistent node with a time to live.
    pub const PERSISTENT_WITH_TTL: i32 = 5;
    /// A persistent sequential node with a time to live.
    pub const PERSISTENT_SEQUENTIAL_WITH_TTL: i32 = 6;
}

/// Watch event types (`Watcher.Event.EventType`).
pub mod event_type {
    /// A session state change (no node).
    pub const NONE: i32 = -1;
    /// A node was created.
    pub const NODE_CREATED: i32 = 1;
    /// A node was deleted.
    pub const NODE_DELETED: i32 = 2;
    /// A node's data changed.
    pub const NODE_DATA_CHANGED: i32 = 3;
    /// A node's children changed.
    pub const NODE_CHILDREN_CHANGED: i32 = 4;
    /// A data watch was removed.
    pub const DATA_WATCH_REMOVED: i32 = 5;
    /// A child watch was removed.
    pub const CHILD_WATCH_REMOVED: i32 = 6;
    /// A persistent watch was removed.
    pub const PERSISTENT_WATCH_REMOVED: i32 = 7;
}

/// Keeper states (`Watcher.Event.KeeperState`) carried by notifications.
pub mod keeper_state {
    /// Disconnected.
    pub const DISCONNECTED: i32 = 0;
    /// Connected: every node notification carries this.
    pub const SYNC_CONNECTED: i32 = 3;
    /// Authentication failed.
    pub const AUTH_FAILED: i32 = 4;
    /// Connected to a read-only server.
    pub const CONNECTED_READ_ONLY: i32 = 5;
    /// The session expired.
    pub const EXPIRED: i32 = -112;
    /// The client closed.
    pub const CLOSED: i32 = 7;
}

/// The watch types of `removeWatches`/`checkWatches` (`Watcher.WatcherType`).
pub mod watcher_type {
    /// Child watches.
    pub const CHILDREN: i32 = 1;
    /// Data (and exists) watches.
    pub const DATA: i32 = 2;
    /// Any watch.
    pub const ANY: i32 = 3;
    /// Persistent watches.
    pub const PERSISTENT: i32 = 4;
    /// Persistent recursive watches.
    pub const PERSISTENT_RECURSIVE: i32 = 5;
}

/// The modes of `addWatch` (`AddWatchMode`).
pub mod add_watch_mode {
    /// A persistent watch on one node.
    pub const PERSISTENT: i32 = 0;
    /// A persistent watch on a node and every node under it.
    pub const PERSISTENT_RECURSIVE: i32 = 1;
}

//! Security options of every subcommand: credentials, the ACL of created nodes, TLS.
//!
//! Passwords are taken from a file or the environment, never from the command line, where
//! every user of the machine can read them (`ps`, /proc/PID/cmdline).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use zklock::acl::NodeAcl;
use zklock::ClientBuilder;

use crate::Failure;

/// The environment variable holding the password of `--auth-digest` (and `--sasl-user`).
pub const PASSWORD_ENV: &str = "ZKLOCK_PASSWORD";

#[derive(Debug, Args)]
pub struct SecurityArgs {
    /// Authenticate with ZooKeeper's digest scheme as USER (zkCli's `addauth digest
    /// USER:PASSWORD`). The password comes from --password-file or $ZKLOCK_PASSWORD, never
    /// from the command line. A wrong password is just another identity: it fails only where
    /// an ACL keeps that identity out.
    #[arg(long, global = true, value_name = "USER")]
    auth_digest: Option<String>,

    /// Authenticate with SASL DIGEST-MD5 as USER (servers with SASLAuthenticationProvider and
    /// a JAAS Server section). Password as for --auth-digest; wrong credentials fail at once.
    #[arg(
        long,
        global = true,
        value_name = "USER",
        conflicts_with = "auth_digest"
    )]
    sasl_user: Option<String>,

    /// Read the password from the first line of FILE instead of $ZKLOCK_PASSWORD. Keep the
    /// file private (chmod 600).
    #[arg(long, global = true, value_name = "FILE")]
    password_file: Option<PathBuf>,

    /// ACL of the nodes zklock creates. `creator` and `creator-read` need credentials; with
    /// them, other identities cannot delete (break) or join the lock, and with `creator-read`
    /// can still see it (`zklock status`).
    #[arg(long, global = true, value_enum, value_name = "ACL", default_value_t = Acl::Open)]
    acl: Acl,

    /// Connect over TLS (the servers' secureClientPort), trusting the CA certificate(s) in
    /// FILE (PEM). Server certificates must name the host of the connect string.
    #[arg(long, global = true, value_name = "FILE")]
    tls_ca: Option<PathBuf>,

    /// Client certificate (PEM) for servers that require one (ssl.clientAuth=need); needs
    /// --tls-key and --tls-ca.
    #[arg(long, global = true, value_name = "FILE")]
    tls_cert: Option<PathBuf>,

    /// Private key (PEM) of --tls-cert.
    #[arg(long, global = true, value_name = "FILE")]
    tls_key: Option<PathBuf>,
}

/// `--acl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Acl {
    /// Anyone may do anything (ZooKeeper's default): anyone can break the lock.
    Open,
    /// Only the authenticated identity (CREATOR_ALL).
    Creator,
    /// The authenticated identity, plus read access for everyone.
    CreatorRead,
}

impl SecurityArgs {
    /// Adds the credentials, ACL and TLS options to `builder`.
    pub fn apply(&self, mut builder: ClientBuilder) -> Result<ClientBuilder, Failure> {
        let sasl_user = self.sasl_user.as_deref();

        if let Some(user) = &self.auth_digest {
            builder = builder.auth_digest(user, &self.password("--auth-digest")?);
        } else if let Some(user) = sasl_user {
            builder = builder.sasl_digest_md5(user, &self.password("--sasl-user")?);
        } else if self.password_file.is_some() {
            return Err(Failure::error(
                "--password-file needs --auth-digest USER (or --sasl-user USER)",
            ));
        }

        let authenticated = self.auth_digest.is_some() || sasl_user.is_some();
        builder = builder.acl(match self.acl {
            Acl::Open => NodeAcl::Open,
            Acl::Creator => NodeAcl::CreatorOnly,
            Acl::CreatorRead => NodeAcl::CreatorOnlyAnyoneRead,
        });
        if self.acl != Acl::Open && !authenticated {
            return Err(Failure::error(format!(
                "--acl {} needs credentials: --auth-digest USER (or --sasl-user USER) with the \
                 password in ${PASSWORD_ENV} or --password-file",
                self.acl
                    .to_possible_value()
                    .map_or_else(String::new, |v| v.get_name().to_owned()),
            )));
        }

        self.apply_tls(builder)
    }

    fn apply_tls(&self, mut builder: ClientBuilder) -> Result<ClientBuilder, Failure> {
        match (&self.tls_ca, &self.tls_cert, &self.tls_key) {
            (None, None, None) => return Ok(builder),
            (None, _, _) => {
                return Err(Failure::error(
                    "--tls-cert and --tls-key need --tls-ca FILE (the CA that signed the \
                     servers' certificates)",
                ))
            }
            (Some(_), Some(_), None) | (Some(_), None, Some(_)) => {
                return Err(Failure::error(
                    "--tls-cert and --tls-key go together (a certificate and its key)",
                ))
            }
            (Some(ca), cert, key) => {
                builder = builder.tls(&read_file("--tls-ca", ca)?);
                if let (Some(cert), Some(key)) = (cert, key) {
                    let key_pem = read_file("--tls-key", key)?;
                    warn_if_shared("--tls-key", key);
                    builder = builder.tls_identity(&read_file("--tls-cert", cert)?, &key_pem);
                }
            }
        }
        Ok(builder)
    }

    /// The password: the first line of --password-file, else $ZKLOCK_PASSWORD.
    fn password(&self, option: &str) -> Result<String, Failure> {
        let password = match &self.password_file {
            Some(file) => {
                let text = read_file("--password-file", file)?;
                warn_if_shared("--password-file", file);
                let line = text.lines().next().unwrap_or_default();
                line.strip_suffix('\r').unwrap_or(line).to_owned()
            }
            None => match std::env::var(PASSWORD_ENV) {
                Ok(password) => password,
                Err(std::env::VarError::NotPresent) => {
                    return Err(Failure::error(format!(
                        "{option} needs a password: set ${PASSWORD_ENV} or give \
                         --password-file FILE (passwords are never taken from the command line)"
                    )))
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(Failure::error(format!(
                        "${PASSWORD_ENV} is not valid UTF-8"
                    )))
                }
            },
        };
        if password.is_empty() {
            return Err(Failure::error(format!("{option}: the password is empty")));
        }
        Ok(password)
    }
}

fn read_file(option: &str, file: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(file)
        .map_err(|e| Failure::error(format!("{option} {}: {e}", file.display())))
}

/// Secrets should be readable by their owner only; say so (once per file) if not.
fn warn_if_shared(option: &str, file: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = std::fs::metadata(file) {
        if meta.permissions().mode() & 0o077 != 0 {
            log::warn!(
                "{option} {} is readable by other users; chmod 600 it",
                file.display()
            );
        }
    }
}

/// A one-line explanation of a library error, with a hint for the security ones.
pub fn explain(err: &zklock::Error) -> String {
    match err {
        // The error names the identity, the permission and the node already.
        zklock::Error::NoAuth { .. } => format!(
            "{err}: its ACL does not admit this identity (authenticate as an identity it admits \
             with --auth-digest or --sasl-user)"
        ),
        zklock::Error::AuthFailed => format!(
            "{err}: the server rejected the credentials (check the user and the password in \
             ${PASSWORD_ENV} or --password-file)"
        ),
        _ => err.to_string(),
    }
}

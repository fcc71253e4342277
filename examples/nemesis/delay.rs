//! Latency without netem: packets sent to NFQUEUE (by `iptables-legacy ... -j NFQUEUE`) are
//! held here for a fixed delay and then accepted, in arrival order. That is what netem's
//! `delay` does; this kernel has no `sch_netem` (nor `prio`), so `tc` cannot delay selected
//! flows here, and nftables' own `queue` statement is not built either (`CONFIG_NFT_QUEUE`),
//! while the xtables `NFQUEUE` target and `nfnetlink_queue` are.
//!
//! The protocol is the kernel's `nfnetlink_queue` (linux/netfilter/nfnetlink_queue.h), spoken
//! over a raw netlink socket with nothing but libc: bind the queue, ask for metadata only,
//! read each packet's id, send an ACCEPT verdict for it when its time has come.
//!
//! Bounded: after `--until-ms` (CLOCK_MONOTONIC, ms) no new delay is started in earnest — the
//! orchestrator removes the rules then — and the program exits once every held packet has been
//! released, at the latest `delay + 2 s` after `until`, accepting whatever is still held.
//! Rules use `--queue-bypass`, so packets pass undelayed once nobody listens.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::{mono_ns, Args};

const NETLINK_NETFILTER: libc::c_int = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NF_ACCEPT: u32 = 1;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;

struct Socket(libc::c_int);

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.0) };
    }
}

impl Socket {
    fn open() -> anyhow::Result<Socket> {
        // SAFETY: plain socket(2) call.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if fd < 0 {
            bail!("netlink socket: {}", std::io::Error::last_os_error());
        }
        let sock = Socket(fd);
        // SAFETY: a zeroed sockaddr_nl is valid; we fill in the family.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `addr` is a valid sockaddr_nl of the given size.
        let rc = unsafe {
            libc::bind(
                fd,
                &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            bail!("netlink bind: {}", std::io::Error::last_os_error());
        }
        // A large receive buffer, so that a burst never overflows it (a lost notification
        // would leave its packet held until the queue is torn down).
        let size: libc::c_int = 8 << 20;
        // SAFETY: setsockopt with a valid int option value.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        Ok(sock)
    }

    fn send(&self, msg: &[u8]) -> anyhow::Result<()> {
        // SAFETY: `msg` is a valid buffer; the kernel is the default destination.
        let n = unsafe { libc::send(self.0, msg.as_ptr() as *const libc::c_void, msg.len(), 0) };
        if n < 0 {
            bail!("netlink send: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `timeout` for data, then reads one datagram (empty if none).
    fn recv(&self, buf: &mut [u8], timeout: Duration) -> anyhow::Result<usize> {
        let mut pfd = libc::pollfd {
            fd: self.0,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(1000) as libc::c_int;
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready <= 0 {
            return Ok(0);
        }
        // SAFETY: `buf` is a valid writable buffer.
        let n = unsafe {
            libc::recv(
                self.0,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EAGAIN) {
                return Ok(0);
            }
            bail!("netlink recv: {err}");
        }
        Ok(n as usize)
    }
}

/// One netlink message of the queue subsystem: header, nfgenmsg, attributes.
fn message(kind: u16, flags: u16, seq: u32, queue: u16, attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = vec![libc::AF_UNSPEC as u8, 0];
    body.extend_from_slice(&queue.to_be_bytes());
    for (kind, payload) in attrs {
        let len = 4 + payload.len();
        body.extend_from_slice(&(len as u16).to_ne_bytes());
        body.extend_from_slice(&kind.to_ne_bytes());
        body.extend_from_slice(payload);
        while body.len() % 4 != 0 {
            body.push(0);
        }
    }
    let mut msg = Vec::with_capacity(16 + body.len());
    msg.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&body);
    msg
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Sends a configuration message and waits for the kernel's acknowledgement.
fn configure(sock: &Socket, seq: u32, queue: u16, attr: (u16, Vec<u8>)) -> anyhow::Result<()> {
    sock.send(&message(
        NFQNL_MSG_CONFIG,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        queue,
        &[attr],
    ))?;
    let mut buf = vec![0u8; 65536];
    let deadline = mono_ns() + 2_000_000_000;
    while mono_ns() < deadline {
        let n = sock.recv(&mut buf, Duration::from_millis(200))?;
        let mut at = 0;
        while at + 16 <= n {
            let len = u32_at(&buf, at) as usize;
            if len < 16 || at + len > n {
                break;
            }
            if u16_at(&buf, at + 4) == NLMSG_ERROR && u32_at(&buf, at + 8) == seq {
                let code = i32::from_ne_bytes(buf[at + 16..at + 20].try_into().unwrap());
                if code != 0 {
                    bail!(
                        "nfnetlink_queue refused the configuration: {}",
                        std::io::Error::from_raw_os_error(-code)
                    );
                }
                return Ok(());
            }
            at += (len + 3) & !3;
        }
    }
    bail!("nfnetlink_queue did not acknowledge the configuration")
}

fn verdict(sock: &Socket, queue: u16, id: u32) -> anyhow::Result<()> {
    let mut payload = NF_ACCEPT.to_be_bytes().to_vec();
    payload.extend_from_slice(&id.to_be_bytes());
    sock.send(&message(
        NFQNL_MSG_VERDICT,
        NLM_F_REQUEST,
        0,
        queue,
        &[(NFQA_VERDICT_HDR, payload)],
    ))
}

/// The packet ids of the packet notifications in one datagram.
fn packet_ids(buf: &[u8]) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut at = 0;
    while at + 16 <= buf.len() {
        let len = u32_at(buf, at) as usize;
        if len < 16 || at + len > buf.len() {
            break;
        }
        if u16_at(buf, at + 4) == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
            // Attributes follow the 16-byte header and the 4-byte nfgenmsg.
            let mut a = at + 20;
            while a + 4 <= at + len {
                let alen = u16_at(buf, a) as usize;
                if alen < 4 {
                    break;
                }
                if u16_at(buf, a + 2) & 0x3fff == NFQA_PACKET_HDR && alen >= 8 {
                    let id = &buf[a + 4..a + 8];
                    ids.push(u32::from_be_bytes(id.try_into().unwrap()));
                }
                a += (alen + 3) & !3;
            }
        }
        at += (len + 3) & !3;
    }
    ids
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let queue: u16 = args.num("queue", None)?;
    let delay_ns = args.num::<u64>("delay-ms", None)? * 1_000_000;
    let until = args.num::<u64>("until-ms", None)? * 1_000_000;
    let hard_stop = until + delay_ns + 2_000_000_000;
    let sock = Socket::open()?;
    configure(
        &sock,
        1,
        queue,
        (NFQA_CFG_CMD, vec![NFQNL_CFG_CMD_BIND, 0, 0, 2]),
    )
    .context("binding the queue")?;
    let mut params = 0u32.to_be_bytes().to_vec();
    params.push(NFQNL_COPY_META);
    configure(&sock, 2, queue, (NFQA_CFG_PARAMS, params)).context("copy mode")?;
    configure(
        &sock,
        3,
        queue,
        (NFQA_CFG_QUEUE_MAXLEN, 20_000u32.to_be_bytes().to_vec()),
    )
    .context("queue length")?;
    // The orchestrator adds the rules only after this line.
    println!("bound");
    std::io::stdout().flush()?;

    let mut held: VecDeque<(u32, u64)> = VecDeque::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut delayed = 0u64;
    loop {
        let now = mono_ns();
        while let Some(&(id, due)) = held.front() {
            if due > now && now < hard_stop {
                break;
            }
            verdict(&sock, queue, id)?;
            held.pop_front();
        }
        if now >= hard_stop || (now >= until && held.is_empty()) {
            break;
        }
        let wait = held.front().map_or(50_000_000, |&(_, due)| {
            due.saturating_sub(now).min(50_000_000)
        });
        let n = sock.recv(&mut buf, Duration::from_nanos(wait.max(1_000_000)))?;
        if n > 0 {
            let arrived = mono_ns();
            for id in packet_ids(&buf[..n]) {
                held.push_back((id, arrived + delay_ns));
                delayed += 1;
            }
        }
    }
    // The orchestrator logs this with the heal.
    println!("{delayed}");
    Ok(())
}

//! A fault-injecting TCP proxy on loopback: a client connects through it to the real server,
//! and a test can sever every connection or blackhole traffic (accept and read, never forward),
//! so the client sees silence rather than a reset.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

#[derive(Default)]
struct Shared {
    blackhole: AtomicBool,
    drop_replies: AtomicBool,
    refuse: AtomicBool,
    stop: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
}

pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Starts a proxy to `upstream` (`host:port`) on an ephemeral loopback port.
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let upstream = upstream.to_owned();
        let state = shared.clone();
        listener.set_nonblocking(true).unwrap();
        thread::spawn(move || {
            while !state.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((down, _)) => {
                        if state.refuse.load(Ordering::SeqCst) {
                            drop(down);
                            continue;
                        }
                        down.set_nonblocking(false).unwrap();
                        let Ok(up) = TcpStream::connect(&upstream) else {
                            continue;
                        };
                        let _ = up.set_nodelay(true);
                        let _ = down.set_nodelay(true);
                        state
                            .conns
                            .lock()
                            .unwrap()
                            .extend([down.try_clone().unwrap(), up.try_clone().unwrap()]);
                        pump(
                            down.try_clone().unwrap(),
                            up.try_clone().unwrap(),
                            state.clone(),
                            false,
                        );
                        pump(up, down, state.clone(), true);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Proxy { addr, shared }
    }

    /// `127.0.0.1:<port>` of the proxy.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Drops every open connection (the client sees a reset and reconnects).
    pub fn sever(&self) {
        for conn in self.shared.conns.lock().unwrap().drain(..) {
            let _ = conn.shutdown(Shutdown::Both);
        }
    }

    /// Stops forwarding in both directions without closing anything.
    pub fn blackhole(&self, on: bool) {
        self.shared.blackhole.store(on, Ordering::SeqCst);
    }

    /// Forwards requests to the server but swallows everything it sends back: requests execute,
    /// their replies are lost.
    pub fn drop_replies(&self, on: bool) {
        self.shared.drop_replies.store(on, Ordering::SeqCst);
    }

    /// Refuses new connections (closes them at once) while on.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.sever();
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, state: Arc<Shared>, replies: bool) {
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if state.blackhole.load(Ordering::SeqCst)
                || (replies && state.drop_replies.load(Ordering::SeqCst))
            {
                continue; // swallowed
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

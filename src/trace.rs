//! The client crate's own log lines (it logs through `tracing`), relayed to the `log` facade.
//!
//! `zookeeper-client` reports connection failures, state changes and session establishment only
//! as `tracing` events, which users of `log` never see. Turning on tracing's `log` feature would
//! forward them, but on the thread that emits them, zklock's runtime thread, through the
//! application's logger, which may block (see `relay.rs`), and for the whole dependency graph
//! at once. Instead, zklock's runtime thread gets a thread-local `tracing` subscriber of its
//! own that formats the crate's events of level info and above and queues them to the log
//! relay, without waiting. The crate's debug and trace events (one per request) are not
//! relayed: formatting them would cost the runtime thread on every request.
//!
//! An application that installed a global `tracing` subscriber before connecting keeps
//! receiving the crate's events there instead, as before.

use std::fmt::Write as _;

use log::Level;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// Installs the relay as the calling thread's `tracing` subscriber until the guard is dropped,
/// unless the application set a global one.
pub(crate) fn install() -> Option<tracing::dispatcher::DefaultGuard> {
    if tracing::dispatcher::has_been_set() {
        return None;
    }
    Some(tracing::dispatcher::set_default(&tracing::Dispatch::new(
        Relay,
    )))
}

struct Relay;

fn relayed(metadata: &Metadata<'_>) -> Option<Level> {
    if !metadata.is_event() {
        return None;
    }
    let level = match *metadata.level() {
        tracing::Level::ERROR => Level::Error,
        tracing::Level::WARN => Level::Warn,
        tracing::Level::INFO => Level::Info,
        _ => return None,
    };
    (level <= log::max_level()).then_some(level)
}

impl Subscriber for Relay {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        // `max_level` may change later: decide per event for the ones that could pass.
        if metadata.is_event() && *metadata.level() <= tracing::Level::INFO {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        relayed(metadata).is_some()
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::INFO)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1) // Spans are never enabled; an id is required all the same.
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let Some(level) = relayed(metadata) else {
            return;
        };
        let mut text = Text(String::new());
        event.record(&mut text);
        crate::relay::queue(level, metadata.target(), format_args!("{}", text.0));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// An event's message, then its other fields as `name=value`.
struct Text(String);

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let fields = std::mem::take(&mut self.0);
            let _ = write!(self.0, "{value:?}{fields}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

//! `zklock completions` and `zklock man`: shell completions and man pages generated from the
//! argument parser's own definitions, so they never disagree with `--help`.

use std::io::Write as _;

use clap::CommandFactory as _;

use crate::{Cli, CompletionsArgs, Failure, ManArgs, Outcome};

pub fn completions(args: &CompletionsArgs) -> Outcome {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "zklock", &mut out);
    write_stdout(&out)
}

pub fn man(args: &ManArgs) -> Outcome {
    match &args.dir {
        Some(dir) => {
            clap_mangen::generate_to(Cli::command(), dir).map_err(|e| {
                Failure::error(format!("writing man pages to {}: {e}", dir.display()))
            })?;
            Ok(0)
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .map_err(|e| Failure::error(format!("rendering the man page: {e}")))?;
            write_stdout(&out)
        }
    }
}

fn write_stdout(bytes: &[u8]) -> Outcome {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(0),
        // `zklock man | head`: the reader has seen enough.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Failure::error(format!("writing to stdout: {e}"))),
    }
}

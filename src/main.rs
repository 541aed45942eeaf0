use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match veilfs::app::run(veilfs::cli::Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            // Paths from the command line and the tree: never a control character raw.
            eprintln!("veilfs: {}", veilfs::escape::escape(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

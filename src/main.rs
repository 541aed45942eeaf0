use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match veilfs::app::run(veilfs::cli::Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("veilfs: {e:#}");
            ExitCode::from(2)
        }
    }
}

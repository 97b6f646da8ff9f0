//! The command line, parsed by clap before anything else is read, so `--help`
//! and `--version` work whatever the environment or `.env` holds. Settings
//! come after, from `config/`, `.env` and the environment; flags override them.

pub mod chat;
pub mod doctor;
pub mod healthcheck;
mod terminal;

use clap::{Args, Parser, Subcommand};

use crate::settings::Settings;

/// assistant-runtime: an AI assistant beside any application's own UI.
///
/// Settings come from config/default.env, then .env, then the environment
/// (see README, Configure); flags override them. Without a command it serves.
#[derive(Debug, Parser)]
#[command(
    name = "assistant-runtime",
    version,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve`'s flags, accepted without the word `serve`.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve HTTP, Socket.IO and AG-UI (the default command).
    Serve(ServeArgs),
    /// Apply the database migrations (DATABASE_URL) and exit.
    Migrate,
    /// Show the settings in effect (secrets masked), check each provider and
    /// the database; exit 0 when the runtime can answer turns, 1 otherwise.
    Doctor,
    /// Ask the local runtime's /readyz (SERVER__HOST, SERVER__PORT); exit 0
    /// when it is ready, 1 otherwise. For a container HEALTHCHECK.
    Healthcheck,
    /// Talk to a running server from the terminal: streamed answers, and a
    /// prompt for each host action's result.
    Chat(chat::ChatArgs),
}

#[derive(Clone, Debug, Default, Args)]
pub struct ServeArgs {
    /// Address to listen on [overrides SERVER__HOST; default 127.0.0.1]
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Port to listen on, 0..65535, 0 for any free port [overrides SERVER__PORT; default 7100]
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
}

impl ServeArgs {
    /// Flags win over every settings source.
    pub fn apply(&self, settings: &mut Settings) {
        if let Some(host) = &self.host {
            settings.host = host.clone();
        }
        if let Some(port) = self.port {
            settings.port = port;
        }
    }
}

impl Cli {
    /// The command to run, `serve` when none was named, with its flags.
    pub fn into_command(self) -> Command {
        self.command.unwrap_or(Command::Serve(self.serve))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn no_command_means_serve_with_its_flags() {
        let cli = Cli::try_parse_from(["assistant-runtime", "--port=7125"]).unwrap();
        match cli.into_command() {
            Command::Serve(args) => assert_eq!(args.port, Some(7125)),
            other => panic!("expected serve, got {other:?}"),
        }
    }

    #[test]
    fn port_zero_means_any_free_port_as_in_the_setting() {
        let cli = Cli::try_parse_from(["assistant-runtime", "--port", "0"]).unwrap();
        match cli.into_command() {
            Command::Serve(args) => assert_eq!(args.port, Some(0)),
            other => panic!("expected serve, got {other:?}"),
        }
    }

    #[test]
    fn out_of_range_ports_are_refused_by_name() {
        for port in ["70000", "seven", "1.5"] {
            let error = Cli::try_parse_from(["assistant-runtime", "serve", "--port", port])
                .unwrap_err()
                .to_string();
            assert!(error.contains("--port"), "{error}");
        }
    }
}

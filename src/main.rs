//! The `assistant-runtime` binary: `serve` (default), `migrate`, `doctor`,
//! `healthcheck`, `chat`.
//! The command line is parsed first (clap), so help and version never depend
//! on the settings; a bad setting then exits 2 naming it.

use std::path::Path;
use std::process::ExitCode;

use assistant_runtime::cli::{doctor, healthcheck, Cli, Command};
use assistant_runtime::settings::Settings;
use assistant_runtime::startup::{migrate_only, Application};
use clap::Parser;

/// mimalloc instead of glibc's malloc: a turn allocates and frees many small
/// objects across threads, and glibc's arenas spent a quarter of the
/// server's CPU on it (`_int_malloc`, `malloc_consolidate`, `sysmalloc`).
/// Built with `no_thp`: with transparent huge pages, each fresh mimalloc page
/// (after its memory was purged, or as the store grows) faulted in a whole
/// 2 MiB zeroed by the kernel, 18 % of the CPU under chat load.
/// `allocator` says why it is not the `mimalloc` crate's wrapper.
#[global_allocator]
static ALLOCATOR: assistant_runtime::allocator::MiMalloc = assistant_runtime::allocator::MiMalloc;

#[actix_web::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every HTTP client of the process (models, MCP, chat, doctor) uses rustls on ring.
    actors::model::tls::install_crypto_provider();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    // A client of another server: the local settings do not concern it.
    let cli = match cli.into_command() {
        Command::Chat(args) => {
            return match assistant_runtime::cli::chat::run(args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("assistant-runtime chat: {error}");
                    ExitCode::from(1)
                }
            }
        }
        other => other,
    };
    let mut settings = match Settings::load(Path::new("config")) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("assistant-runtime: {error}");
            return ExitCode::from(2);
        }
    };
    match cli {
        // Handled above, before the settings were read.
        Command::Chat(_) => ExitCode::SUCCESS,
        Command::Serve(args) => {
            args.apply(&mut settings);
            serve(settings).await
        }
        Command::Migrate => migrate(settings).await,
        Command::Healthcheck => {
            if healthcheck::run(&settings).await {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Doctor => {
            if doctor::run(&settings).await {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    }
}

async fn migrate(settings: Settings) -> ExitCode {
    match migrate_only(&settings).await {
        Ok(applied) if applied.is_empty() => {
            println!("assistant-runtime: the database schema is up to date");
            ExitCode::SUCCESS
        }
        Ok(applied) => {
            println!("assistant-runtime: applied migrations {applied:?}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("assistant-runtime: {error}");
            ExitCode::from(1)
        }
    }
}

async fn serve(settings: Settings) -> ExitCode {
    match assistant_runtime::open_files::raise_soft_limit() {
        Ok((soft, _)) => log::info!("open files: up to {soft}"),
        Err(error) => log::warn!("cannot raise the limit on open files: {error}"),
    }
    let application = match Application::build(settings).await {
        Ok(application) => application,
        Err(error) => {
            eprintln!("assistant-runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match application.run_until_stopped().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("assistant-runtime: server stopped: {error}");
            ExitCode::from(1)
        }
    }
}

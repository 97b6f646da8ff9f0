//! The `assistant-runtime` binary: `serve` (default) and `migrate`.

use std::path::Path;
use std::process::ExitCode;

use assistant_runtime::settings::Settings;
use assistant_runtime::startup::{migrate_only, Application};

const USAGE: &str = "usage: assistant-runtime [serve [--host HOST] [--port PORT] | migrate]";

#[actix_web::main]
async fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, flags) = match args.first().map(String::as_str) {
        None => ("serve", &args[..]),
        Some(flag) if flag.starts_with("--") => ("serve", &args[..]),
        Some(command) => (command, &args[1..]),
    };
    let mut settings = match Settings::load(Path::new("config")) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("assistant-runtime: {error}");
            return ExitCode::from(2);
        }
    };
    if let Err(message) = apply_flags(&mut settings, flags) {
        eprintln!("assistant-runtime: {message}\n{USAGE}");
        return ExitCode::from(2);
    }
    match command {
        "serve" => serve(settings).await,
        "migrate" => migrate(settings).await,
        other => {
            eprintln!("assistant-runtime: unknown command {other:?}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn apply_flags(settings: &mut Settings, flags: &[String]) -> Result<(), String> {
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        let value = flags
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--host" => settings.host = value.clone(),
            "--port" => {
                settings.port = value
                    .parse()
                    .map_err(|_| format!("--port: not a port number: {value:?}"))?
            }
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    Ok(())
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

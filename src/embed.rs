//! The embedding API, for Rust hosts. [`AssistantDefinition`] takes the
//! host's backend tools (typed, [`TypedTool`], or hand-written,
//! `actors::tools::Tool`), its state ([`State`]), the profile, usage limits
//! (the stricter of these and the settings apply) and an `authenticate`
//! hook. Then either:
//! - [`AssistantDefinition::assistant`] builds an [`Assistant`] the host
//!   mounts in its own actix-web `App` under a prefix
//!   (`App::new().service(assistant.scope("/assistant"))`), beside its own
//!   routes, middleware and TLS (`examples/mounted_host.rs`); or
//! - [`AssistantDefinition::serve`] runs the standalone server, as the
//!   `assistant-runtime` binary does (`examples/embedded_host.rs`).
//!
//! Settings come from [`SettingsBuilder`] in code, or from the environment
//! when the host asks for it (`SettingsBuilder::from_env`, `Settings::load`).
//! Apart from `serve`, nothing here reads files or the environment, sets up
//! logging or installs an allocator.

mod typed;

pub use crate::access::identity::{AuthenticateHook, Credentials, Principal, Refusal};
pub use crate::mount::Assistant;
pub use crate::settings::SettingsBuilder;
pub use typed::{parameters_of, State, TypedTool};

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use actors::prompt::profile::Profile;
use actors::tools::{check_schema, BackendTool, DepsFactory, SharedTool, Tool};
use actors::turn::Budget;

use clap::Parser;

use crate::access_settings::AccessMode;
use crate::cli::ServeArgs;
use crate::extensions::Extensions;
use crate::settings::Settings;
use crate::startup::{Application, StartupError};

/// Why a definition could not be built: each names what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A tool's name is empty, too long or has other characters.
    #[error("tool {0:?}: a name is 1..64 letters, digits, '_' or '-'")]
    ToolName(String),
    /// A tool's name is a built-in tool's or another host tool's.
    #[error("tool {0:?}: another tool has this name")]
    ToolNameTaken(String),
    /// A tool's parameters schema is outside what the validator accepts.
    #[error("tool {tool:?}: its parameters schema does not compile: {reason}")]
    ToolSchema {
        /// The tool's name.
        tool: String,
        /// What the validator refused in the schema.
        reason: String,
    },
    /// `ACCESS__MODE` names another mode than the hook's.
    #[error("{0}")]
    AccessMode(String),
    /// The profile directory could not be read.
    #[error("profile: {0}")]
    Profile(String),
    /// The store, the access settings or CORS could not be set up.
    #[error("{0}")]
    Startup(String),
}

/// The command line of a host's binary: `serve`'s flags.
#[derive(Debug, Parser)]
#[command(about = "An assistant-runtime server built with the embedding API")]
struct HostCommandLine {
    #[command(flatten)]
    serve: ServeArgs,
}

/// The access mode of a definition with an `authenticate` hook: `host`,
/// unless the operator chose another mode, which is refused naming both.
fn hook_mode(mode: &AccessMode, chosen: bool) -> Result<AccessMode, String> {
    match (mode, chosen) {
        (AccessMode::Host, _) | (_, false) => Ok(AccessMode::Host),
        (other, true) => Err(format!(
            "setting ACCESS__MODE={} would turn off this host's authenticate hook              (AssistantDefinition::authenticate): unset ACCESS__MODE or set it to host,              or build without the hook",
            mode_name(other)
        )),
    }
}

fn mode_name(mode: &AccessMode) -> &'static str {
    match mode {
        AccessMode::TrustedLocal { .. } => "trusted_local",
        AccessMode::Header { .. } => "header",
        AccessMode::Jwt(_) => "jwt",
        AccessMode::Host => "host",
    }
}

/// A host's assistant: its tools, state, profile, limits and
/// authentication. Build it with [`AssistantDefinition::assistant`] to
/// mount in the host's own `App`, or run it with
/// [`AssistantDefinition::serve`].
#[derive(Default)]
pub struct AssistantDefinition {
    extensions: Extensions,
    authenticate: Option<AuthenticateHook>,
}

impl AssistantDefinition {
    /// A definition with no tools, no state, the settings' profile and
    /// limits, and the settings' access mode.
    ///
    /// ```
    /// use assistant_runtime::embed::{AssistantDefinition, Principal, Refusal};
    ///
    /// let definition = AssistantDefinition::new()
    ///     .max_turns(4)
    ///     .authenticate(|credentials| match credentials.header("authorization") {
    ///         Some("Bearer demo-token") => Ok(Principal { id: "demo".into() }),
    ///         _ => Err(Refusal { message: "a bearer token is required".into() }),
    ///     });
    /// assert!(definition.authenticate_hook().is_some());
    /// ```
    pub fn new() -> AssistantDefinition {
        AssistantDefinition::default()
    }

    /// The host's state the typed tools receive as [`State<T>`] (one value
    /// shared by every session). Replaces a `deps` factory.
    pub fn state<T: Any + Send + Sync>(mut self, state: T) -> AssistantDefinition {
        let state: Arc<dyn Any + Send + Sync> = Arc::new(state);
        self.extensions.deps = Some(DepsFactory(Arc::new(move |_session_id| state.clone())));
        self
    }

    /// Adds a backend tool: a [`TypedTool`], or a hand-written `Tool` (its
    /// JSON schema given as a value, for tools known only at run time). Its
    /// name must not be a built-in tool's.
    pub fn tool(mut self, tool: impl Tool) -> AssistantDefinition {
        self.extensions.tools.push(SharedTool::new(tool));
        self
    }

    /// Makes the deps each accepted turn's tools receive, from the session
    /// id: a typed tool takes them as [`State<T>`], a hand-written one
    /// reads `ToolContext::deps`. Replaces `state`.
    pub fn deps<T, F>(mut self, factory: F) -> AssistantDefinition
    where
        T: Any + Send + Sync,
        F: Fn(&str) -> T + Send + Sync + 'static,
    {
        self.extensions.deps = Some(DepsFactory(Arc::new(move |session_id| {
            Arc::new(factory(session_id)) as Arc<dyn Any + Send + Sync>
        })));
        self
    }

    /// The default profile (an operator's `ASSISTANT__PROFILE` still wins).
    pub fn profile(mut self, profile: Profile) -> AssistantDefinition {
        self.extensions.profile = Some(profile);
        self
    }

    /// `profile` from a directory of markdown parts.
    pub fn profile_dir(self, dir: impl AsRef<Path>) -> Result<AssistantDefinition, EmbedError> {
        let profile = Profile::load(dir.as_ref()).map_err(EmbedError::Profile)?;
        Ok(self.profile(profile))
    }

    /// Model requests per turn; the stricter of this and `ASSISTANT__MAX_TURNS` applies.
    pub fn max_turns(mut self, max_turns: u32) -> AssistantDefinition {
        self.extensions.max_turns = Some(max_turns);
        self
    }

    /// Per-turn ceilings; each is the stricter of this and `ASSISTANT__BUDGET__*`.
    pub fn budget(mut self, budget: Budget) -> AssistantDefinition {
        self.extensions.budget = budget;
        self
    }

    /// The authenticate hook called for every HTTP and AG-UI request (its
    /// headers) and every Socket.IO connect (`auth` and the opening
    /// request's `Authorization` and `Cookie`). With a hook, `ACCESS__MODE`
    /// defaults to `host`; another mode set on purpose stops startup, since
    /// a hook that was given is never silently off.
    pub fn authenticate<F>(mut self, hook: F) -> AssistantDefinition
    where
        F: Fn(&Credentials) -> Result<Principal, Refusal> + Send + Sync + 'static,
    {
        self.authenticate = Some(Arc::new(hook));
        self
    }

    /// The hook given to `authenticate`, if any.
    pub fn authenticate_hook(&self) -> Option<&AuthenticateHook> {
        self.authenticate.as_ref()
    }

    /// Builds the assistant (store, MCP servers, models) from `settings`,
    /// to mount in the host's own `App` with [`Assistant::scope`]. It serves
    /// nothing by itself and reads no file and no environment variable.
    ///
    /// ```no_run
    /// # use assistant_runtime::embed::{AssistantDefinition, SettingsBuilder};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let settings = SettingsBuilder::new().model("builtin:echo").build()?;
    /// let assistant = AssistantDefinition::new().assistant(settings).await?;
    /// actix_web::HttpServer::new(move || {
    ///     actix_web::App::new().service(assistant.scope("/assistant"))
    /// })
    /// .bind(("127.0.0.1", 7100))?
    /// .run()
    /// .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn assistant(self, settings: Settings) -> Result<Assistant, EmbedError> {
        let (settings, extensions) = self.prepare(settings)?;
        Application::assemble_for_host(settings, extensions)
            .await
            .map_err(|error| EmbedError::Startup(error.0))
    }

    /// Builds the standalone server (store, MCP servers, models, listener)
    /// from `settings`. A tool with a bad or taken name, or a schema that
    /// does not compile, is a startup error naming it.
    pub async fn build(self, settings: Settings) -> Result<Application, StartupError> {
        let (settings, extensions) = self
            .prepare(settings)
            .map_err(|error| StartupError(error.to_string()))?;
        Application::build_extended(settings, extensions).await
    }

    /// The checks and the access mode both `build` and `assistant` apply.
    fn prepare(self, mut settings: Settings) -> Result<(Settings, Extensions), EmbedError> {
        self.check_tools()?;
        if self.authenticate.is_some() {
            if let AccessMode::TrustedLocal { token: Some(_) } = &settings.access.mode {
                if !settings.access.mode_chosen {
                    log::warn!("ACCESS__LOCAL_TOKEN is ignored: this host's authenticate hook decides who calls");
                }
            }
            settings.access.mode = hook_mode(&settings.access.mode, settings.access.mode_chosen)
                .map_err(EmbedError::AccessMode)?;
            log::info!("access: every request goes through this host's authenticate hook (ACCESS__MODE=host)");
        }
        let mut extensions = self.extensions;
        extensions.authenticate = self.authenticate;
        Ok((settings, extensions))
    }

    fn check_tools(&self) -> Result<(), EmbedError> {
        let mut taken: Vec<&str> = BackendTool::ALL.iter().map(|tool| tool.name()).collect();
        for tool in &self.extensions.tools {
            let name = tool.name();
            if !actors::tool_name::is_valid(name) {
                return Err(EmbedError::ToolName(name.to_string()));
            }
            if taken.contains(&name) {
                return Err(EmbedError::ToolNameTaken(name.to_string()));
            }
            if let Err(reason) = check_schema(&tool.parameters()) {
                return Err(EmbedError::ToolSchema {
                    tool: name.to_string(),
                    reason,
                });
            }
            taken.push(name);
        }
        Ok(())
    }

    /// What a host's `main` does: `--host`/`--port` (and `--help`) from the
    /// command line, logging, settings from `config/`, `.env` and the
    /// environment (the flags win), then serve until stopped.
    pub async fn serve(self) -> Result<(), StartupError> {
        let command_line = HostCommandLine::parse();
        let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
            .try_init();
        let mut settings =
            Settings::load(Path::new("config")).map_err(|error| StartupError(error.to_string()))?;
        command_line.serve.apply(&mut settings);
        let application = self.build(settings).await?;
        application
            .run_until_stopped()
            .await
            .map_err(|error| StartupError(format!("server stopped: {error}")))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn settings(values: &[(&str, &str)]) -> Settings {
        let mut map = BTreeMap::new();
        map.insert("SERVER__PORT".to_string(), "0".to_string());
        for (key, value) in values {
            map.insert(key.to_string(), value.to_string());
        }
        Settings::from_map(&map).expect("valid settings")
    }

    #[test]
    fn limits_are_the_stricter_and_an_operator_profile_wins() {
        let extensions = Extensions {
            max_turns: Some(20),
            budget: Budget {
                tool_calls: Some(3),
                total_tokens: Some(1000),
                ..Budget::default()
            },
            profile: Some(Profile::from_parts("host", &[("persona.md", "Host.")])),
            ..Extensions::default()
        };
        let configured = settings(&[
            ("ASSISTANT__MAX_TURNS", "5"),
            ("ASSISTANT__BUDGET__TOOL_CALLS", "10"),
            ("ASSISTANT__BUDGET__INPUT_TOKENS", "500"),
        ]);
        assert_eq!(extensions.max_turns(&configured), 5);
        assert_eq!(
            extensions.budget(&configured),
            Budget {
                tool_calls: Some(3),
                input_tokens: Some(500),
                output_tokens: None,
                total_tokens: Some(1000),
            }
        );
        assert_eq!(extensions.profile(&configured).compose(), "Host.");
        let operator = settings(&[("ASSISTANT__SYSTEM_PROMPT", "Operator.")]);
        assert_eq!(extensions.profile(&operator).compose(), "Operator.");
    }
}

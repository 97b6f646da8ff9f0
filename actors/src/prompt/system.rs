//! The system prompt: stable for a session, changing only with configuration.
//! Nothing per turn (time, host context) goes here, so the provider's prompt
//! cache keeps the whole conversation prefix. It is the composed profile
//! (`profile.rs`); the builtin neutral profile is the default.

use super::profile::Profile;

/// The default instructions, or `custom` when configured.
pub fn system_prompt(custom: Option<&str>) -> String {
    match custom {
        Some(text) => text.to_string(),
        None => Profile::builtin().compose(),
    }
}

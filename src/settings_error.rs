//! The error every settings block reports: the setting's name and what is
//! wrong with its value. Its own module so that the blocks the settings are
//! made of (`access_settings`, `deployment`, `provider_settings`) use it
//! without importing the settings that import them.

use std::fmt;

/// A setting that could not be used, with its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingsError {
    pub key: String,
    pub message: String,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "setting {}: {}", self.key, self.message)
    }
}

impl std::error::Error for SettingsError {}

//! Black-box tests, one binary: a module per feature, sharing the harnesses.

mod fake_provider;
mod helpers;
mod host_actions;
mod prompt_prefix;
mod providers;
mod sessions;
mod smoke;
mod tools;
mod validation;

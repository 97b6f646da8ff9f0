//! Black-box tests, one binary: a module per feature, sharing the harnesses.

mod agui;
mod fake_provider;
mod helpers;
mod providers;
mod smoke;

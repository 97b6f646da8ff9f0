//! Black-box tests, one binary: a module per feature, sharing the harnesses.

mod fake_provider;
mod helpers;
mod postgres;
mod providers;
mod smoke;
mod store_faults;

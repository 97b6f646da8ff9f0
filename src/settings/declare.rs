//! How settings are declared: the `declare_settings!` table of
//! `settings.rs` names each field of `Settings` with the settings it is read
//! from (name, default as the README shows it, meaning) and the expression
//! that reads it. From that one table come the struct, its parser, the list
//! of known names (for the unknown-key and near-miss checks) and the
//! README's settings table (`readme_table`, compared with README.md by a
//! test).

/// One setting as documented: its environment name, its default in words
/// (empty: unset), and what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    pub key: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

impl Setting {
    /// A name the environment can hold; `false` for a family of names
    /// documented by pattern (`LLM__PROVIDERS__<NAME>__*`).
    pub fn is_name(&self) -> bool {
        !self.key.contains('<')
    }
}

/// Declares `Settings`: each field with its doc comment, type, the
/// settings it is read from (`"KEY" = "default": "meaning";`, none for a
/// field derived from others) and the expression that reads it. Fields are
/// read in order, so an expression may use the fields above it by name,
/// and `values` (every variable) and `get` (a set, non-blank value by
/// name) as the invocation names them.
macro_rules! declare_settings {
    (
        $(#[$struct_meta:meta])*
        pub struct $name:ident reads ($values:ident, $get:ident) {
            $(
                $(#[$field_meta:meta])*
                pub $field:ident: $ty:ty {
                    $($key:literal = $default:literal: $doc:literal;)*
                } = $read:expr;
            )*
        }
    ) => {
        $(#[$struct_meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        /// Every setting `Settings` reads, in the order of the declaration.
        pub const SETTINGS: &[$crate::settings::declare::Setting] = &[
            $($($crate::settings::declare::Setting {
                key: $key,
                default: $default,
                doc: $doc,
            },)*)*
        ];

        impl $name {
            /// Reads every field, in order, from the merged variables.
            fn read<'a>(
                $values: &'a BTreeMap<String, String>,
                $get: &dyn Fn(&str) -> Option<&'a str>,
            ) -> Result<$name, SettingsError> {
                $(let $field: $ty = $read;)*
                Ok($name { $($field,)* })
            }
        }
    };
}

pub(crate) use declare_settings;

/// The README's settings table: a header and one row per setting of
/// `settings`.
pub fn readme_table(settings: &[Setting]) -> String {
    let mut table = String::from("| setting | default | meaning |\n|---|---|---|\n");
    for setting in settings {
        let default = match setting.default {
            "" => String::new(),
            default => format!("{default} "),
        };
        table.push_str(&format!(
            "| `{}` | {default}| {} |\n",
            setting.key, setting.doc
        ));
    }
    table
}

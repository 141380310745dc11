//! A string that must never be shown: no `Serialize`, a redacting `Debug` and `Display`.
//!
//! Provider keys, client secrets and tokens travel in this type and are exposed only at the
//! outbound call that needs them, through [`Secret::expose`].

use std::fmt;

/// A secret string.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that sends it (an HTTP header, a hash).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The last four characters, for showing which key is which.
    pub fn last4(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        chars[chars.len().saturating_sub(4)..].iter().collect()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(****)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Overwrite the bytes before the allocation is freed (best effort, without `unsafe`).
        let len = self.0.len();
        self.0.clear();
        self.0.extend(std::iter::repeat_n('\0', len));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_value() {
        let s = Secret::new("sk-ARBOR-CANARY-123456");
        assert_eq!(format!("{s:?}"), "Secret(****)");
        assert_eq!(format!("{s}"), "****");
        assert_eq!(s.expose(), "sk-ARBOR-CANARY-123456");
        assert_eq!(s.last4(), "3456");
        assert_eq!(Secret::new("ab").last4(), "ab");
    }
}

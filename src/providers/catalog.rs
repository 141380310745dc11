//! The model catalog: context windows, output limits, prices and capabilities per model.
//!
//! The curated list lives in `config/models.toml` and is compiled in ([`Catalog::builtin`]);
//! an operator's file in the same format can be laid over it ([`Catalog::merged_with`]).
//! [`Catalog::lookup`] always answers: dated or tagged ids match their base entry, and an
//! unknown model gets conservative defaults with `known = false`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The curated catalog, embedded at build time.
const BUILTIN_TOML: &str = include_str!("../../config/models.toml");

/// Context window assumed for a model the catalog does not know, in tokens.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 8192;

/// Output limit assumed for a model the catalog does not know, in tokens.
pub const DEFAULT_MAX_OUTPUT: u32 = 4096;

/// What Arbor knows about one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInfo {
    /// The provider's model id: the id looked up (without a leading `models/`), or the
    /// catalog id for [`Catalog::entries`].
    pub id: String,
    /// Human-readable name (the id when the model is unknown).
    pub label: String,
    /// Total tokens the model can attend to.
    pub context_window: u32,
    /// Most tokens one response may contain.
    pub max_output: u32,
    /// USD per million input tokens; `None` when unknown.
    pub input_per_mtok: Option<f64>,
    /// USD per million output tokens; `None` when unknown.
    pub output_per_mtok: Option<f64>,
    /// USD per million cached input tokens; `None` when unknown (input price applies).
    pub cached_per_mtok: Option<f64>,
    /// Accepts tool (function) definitions.
    pub tools: bool,
    /// Accepts images as input.
    pub vision: bool,
    /// Accepts a reasoning effort or thinking budget.
    pub reasoning: bool,
    /// Makes images (OpenAI's Images API, Gemini's IMAGE modality) rather than chat answers.
    pub image_output: bool,
    /// USD per million image input tokens (an image model's input images); `None`: the input
    /// price applies.
    pub image_input_per_mtok: Option<f64>,
    /// `false` when the model is not in the catalog and conservative defaults were used.
    pub known: bool,
}

impl ModelInfo {
    /// The conservative defaults used for a model the catalog does not know.
    fn unknown(id: &str) -> ModelInfo {
        ModelInfo {
            id: id.to_owned(),
            label: id.to_owned(),
            context_window: DEFAULT_CONTEXT_WINDOW,
            max_output: DEFAULT_MAX_OUTPUT,
            input_per_mtok: None,
            output_per_mtok: None,
            cached_per_mtok: None,
            // Offered: nearly every current model calls tools, and one that refuses them is
            // remembered after its first 400 (`Providers::refuses_tools`).
            tools: true,
            vision: false,
            reasoning: false,
            image_output: false,
            image_input_per_mtok: None,
            known: false,
        }
    }

    /// Cost in micro-dollars (1e-6 USD), rounded to nearest; None when a needed price is unknown.
    ///
    /// `input_tokens` includes `cached_tokens`: the uncached part is charged at the input price,
    /// the cached part at the cached price (the input price when that is unknown), and the
    /// output at the output price. A price is needed only when its token count is non-zero.
    /// `cached_tokens` above `input_tokens` is capped at `input_tokens`.
    pub fn cost_micros(&self, input_tokens: u64, output_tokens: u64, cached_tokens: u64) -> Option<i64> {
        let cached = cached_tokens.min(input_tokens);
        let uncached = input_tokens - cached;
        let mut total = 0u128;
        if uncached > 0 {
            total += charge(uncached, self.input_per_mtok?);
        }
        if cached > 0 {
            total += charge(cached, self.cached_per_mtok.or(self.input_per_mtok)?);
        }
        if output_tokens > 0 {
            total += charge(output_tokens, self.output_per_mtok?);
        }
        Some(to_micros(total))
    }

    /// Cost of an image call in micro-dollars: text input at the input price, input images at
    /// the image input price (the input price when that is unknown), the images made at the
    /// output price. `None` when a needed price is unknown.
    pub fn image_cost_micros(&self, text_input: u64, image_input: u64, output_tokens: u64) -> Option<i64> {
        let mut total = 0u128;
        if text_input > 0 {
            total += charge(text_input, self.input_per_mtok?);
        }
        if image_input > 0 {
            total += charge(image_input, self.image_input_per_mtok.or(self.input_per_mtok)?);
        }
        if output_tokens > 0 {
            total += charge(output_tokens, self.output_per_mtok?);
        }
        Some(to_micros(total))
    }
}

/// 1e-12 USD rounded half up to whole micro-dollars.
fn to_micros(total: u128) -> i64 {
    let micros = (total + PRICE_SCALE / 2) / PRICE_SCALE;
    i64::try_from(micros).unwrap_or(i64::MAX)
}

/// Price units per micro-dollar: prices are kept to 1e-6 USD per million tokens, exactly.
const PRICE_SCALE: u128 = 1_000_000;

/// `tokens` at `per_mtok` USD per million tokens, in 1e-12 USD (exact integer arithmetic).
fn charge(tokens: u64, per_mtok: f64) -> u128 {
    // USD per million tokens is micro-dollars per token; scale to 1e-12 USD per token.
    // Prices are validated finite and >= 0; `as` saturates anything out of range.
    let per_token = (per_mtok * PRICE_SCALE as f64).round() as u128;
    u128::from(tokens).saturating_mul(per_token)
}

/// A provider wire-format family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// OpenAI Chat Completions / Responses.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini (Generative Language API).
    Gemini,
}

impl Family {
    /// The name used in configuration files: `openai`, `anthropic` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::OpenAi => "openai",
            Family::Anthropic => "anthropic",
            Family::Gemini => "gemini",
        }
    }
}

/// Why a catalog file was refused.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The text is not TOML.
    #[error("model catalog is not valid TOML: {0}")]
    Syntax(String),
    /// A top-level key other than `model`, or `model` that is not a list of tables.
    #[error("model catalog: {0}")]
    Layout(String),
    /// One `[[model]]` entry is wrong; `index` counts from 1 in file order.
    #[error("model catalog entry #{index} (id {id:?}): {problem}")]
    Entry {
        /// Position of the entry in the file, from 1.
        index: usize,
        /// The entry's id as written (empty when missing or not a string).
        id: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The keys a `[[model]]` table may have.
const KEYS: [&str; 13] = [
    "provider",
    "id",
    "label",
    "context_window",
    "max_output",
    "input_per_mtok",
    "output_per_mtok",
    "cached_per_mtok",
    "tools",
    "vision",
    "reasoning",
    "image_output",
    "image_input_per_mtok",
];

/// Reads and checks one `[[model]]` table; the error is the problem, naming the key.
fn parse_entry(item: &toml::Value) -> Result<(Family, ModelInfo), String> {
    let Some(table) = item.as_table() else {
        return Err(format!("expected a [[model]] table (found {})", item.type_str()));
    };
    if let Some(key) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("unknown key `{key}` (allowed: {})", KEYS.join(", ")));
    }
    let family = match required(table, "provider", toml::Value::as_str, "a string")? {
        "openai" => Family::OpenAi,
        "anthropic" => Family::Anthropic,
        "gemini" => Family::Gemini,
        other => {
            return Err(format!(
                "unknown `provider` {other:?} (expected \"openai\", \"anthropic\" or \"gemini\")"
            ));
        }
    };
    let id = required(table, "id", toml::Value::as_str, "a string")?;
    if id.is_empty() {
        return Err("`id` is empty".into());
    }
    if id.chars().any(char::is_whitespace) {
        return Err("`id` contains whitespace".into());
    }
    if id.starts_with("models/") {
        return Err("`id` must not start with `models/` (write the bare model id)".into());
    }
    let label = match optional(table, "label", toml::Value::as_str, "a string")? {
        Some(label) if label.trim().is_empty() => return Err("`label` is empty".into()),
        Some(label) => label,
        None => id,
    };
    let context_window = tokens(table, "context_window")?;
    let max_output = tokens(table, "max_output")?;
    if max_output > context_window {
        return Err(format!(
            "`max_output` ({max_output}) is larger than `context_window` ({context_window})"
        ));
    }
    let info = ModelInfo {
        id: id.to_owned(),
        label: label.to_owned(),
        context_window,
        max_output,
        input_per_mtok: price(table, "input_per_mtok")?,
        output_per_mtok: price(table, "output_per_mtok")?,
        cached_per_mtok: price(table, "cached_per_mtok")?,
        tools: flag(table, "tools")?,
        vision: flag(table, "vision")?,
        reasoning: flag(table, "reasoning")?,
        image_output: flag(table, "image_output")?,
        image_input_per_mtok: price(table, "image_input_per_mtok")?,
        known: true,
    };
    Ok((family, info))
}

/// `table[key]` read with `get`; `None` when absent, an error naming `what` was expected.
fn optional<'a, T>(
    table: &'a toml::Table,
    key: &str,
    get: impl Fn(&'a toml::Value) -> Option<T>,
    what: &str,
) -> Result<Option<T>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(value) => {
            get(value).map(Some).ok_or_else(|| format!("`{key}` must be {what} (found {})", value.type_str()))
        }
    }
}

/// Like [`optional`], but a missing key is an error.
fn required<'a, T>(
    table: &'a toml::Table,
    key: &str,
    get: impl Fn(&'a toml::Value) -> Option<T>,
    what: &str,
) -> Result<T, String> {
    optional(table, key, get, what)?.ok_or_else(|| format!("`{key}` is missing"))
}

/// A required token count: an integer from 1 to `u32::MAX`.
fn tokens(table: &toml::Table, key: &str) -> Result<u32, String> {
    let n = required(table, key, toml::Value::as_integer, "an integer")?;
    if n <= 0 {
        return Err(format!("`{key}` must be greater than 0, not {n}"));
    }
    u32::try_from(n).map_err(|_| format!("`{key}` is too large ({n}; at most {})", u32::MAX))
}

/// An optional price in USD per million tokens: a finite number >= 0 (integers allowed).
fn price(table: &toml::Table, key: &str) -> Result<Option<f64>, String> {
    let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    let price = optional(table, key, number, "a number")?;
    match price {
        Some(p) if !(p.is_finite() && p >= 0.0) => {
            Err(format!("`{key}` must be a finite number >= 0, not {p}"))
        }
        _ => Ok(price),
    }
}

/// An optional boolean, false when absent.
fn flag(table: &toml::Table, key: &str) -> Result<bool, String> {
    Ok(optional(table, key, toml::Value::as_bool, "true or false")?.unwrap_or(false))
}

/// One catalog entry: the family it belongs to and what is known about it.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    /// The provider family.
    family: Family,
    /// The curated figures (`known` is always true).
    info: ModelInfo,
}

/// A set of curated models, in file order, unique per (family, id) ignoring ASCII case.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// The entries, in file order.
    entries: Vec<Entry>,
}

impl Catalog {
    /// Parses the catalog compiled into the binary (`config/models.toml`).
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::from_toml(BUILTIN_TOML)
    }

    /// Parses a catalog in the `models.toml` format, refusing unknown keys and bad values.
    pub fn from_toml(text: &str) -> Result<Catalog, CatalogError> {
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            CatalogError::Syntax(e.message().trim_end().to_owned() + &span_suffix(text, e.span()))
        })?;
        let models = table.remove("model");
        if let Some(key) = table.keys().next() {
            return Err(CatalogError::Layout(format!(
                "unknown top-level key `{key}` (only [[model]] tables are allowed)"
            )));
        }
        let items = match models {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items,
            Some(other) => {
                return Err(CatalogError::Layout(format!(
                    "`model` must be a list of [[model]] tables (found {})",
                    other.type_str()
                )));
            }
        };
        let mut entries = Vec::with_capacity(items.len());
        let mut seen: HashMap<(Family, String), usize> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            let index = i + 1;
            let id = item.get("id").and_then(toml::Value::as_str).unwrap_or_default().to_owned();
            let bad = |problem: String| CatalogError::Entry { index, id: id.clone(), problem };
            let (family, info) = parse_entry(item).map_err(bad)?;
            if let Some(first) = seen.insert((family, info.id.to_ascii_lowercase()), index) {
                return Err(bad(format!("duplicate of entry #{first} for provider {}", family.as_str())));
            }
            entries.push(Entry { family, info });
        }
        Ok(Catalog { entries })
    }

    /// Entries of `overrides` replace same (family, id) entries in place; the others are added.
    ///
    /// Ids compare ASCII case-insensitively, as in [`Catalog::lookup`].
    pub fn merged_with(mut self, overrides: Catalog) -> Catalog {
        for entry in overrides.entries {
            let same =
                |e: &&mut Entry| e.family == entry.family && e.info.id.eq_ignore_ascii_case(&entry.info.id);
            match self.entries.iter_mut().find(same) {
                Some(existing) => *existing = entry,
                None => self.entries.push(entry),
            }
        }
        self
    }

    /// What is known about `model_id`: exact entry, else longest dated/tagged prefix, else defaults.
    ///
    /// A leading `models/` (Gemini's list ids) is ignored. Matching is ASCII case-insensitive.
    /// A catalog id matches a longer id only when the remainder starts with `-`, `@` or `:`,
    /// so `gpt-4.1` matches `gpt-4.1-2025-04-14` but not `gpt-4.10`. The returned `id` is
    /// the id asked about (without `models/`); the other figures are the entry's.
    pub fn lookup(&self, family: Family, model_id: &str) -> ModelInfo {
        let wanted = model_id.strip_prefix("models/").unwrap_or(model_id);
        let mut best: Option<&Entry> = None;
        for entry in self.entries.iter().filter(|e| e.family == family) {
            let id = entry.info.id.as_str();
            if id.eq_ignore_ascii_case(wanted) {
                best = Some(entry);
                break;
            }
            let is_prefix = wanted.len() > id.len()
                && wanted.is_char_boundary(id.len())
                && wanted[..id.len()].eq_ignore_ascii_case(id)
                && matches!(wanted.as_bytes()[id.len()], b'-' | b'@' | b':');
            if is_prefix && best.is_none_or(|b| id.len() > b.info.id.len()) {
                best = Some(entry);
            }
        }
        match best {
            Some(entry) => ModelInfo { id: wanted.to_owned(), ..entry.info.clone() },
            None => ModelInfo::unknown(wanted),
        }
    }

    /// The curated entries for `family`, in file order.
    pub fn entries(&self, family: Family) -> Vec<ModelInfo> {
        self.entries.iter().filter(|e| e.family == family).map(|e| e.info.clone()).collect()
    }
}

/// " (line L, column C)" for a byte span of `text`, or nothing when the span is unknown.
fn span_suffix(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else { return String::new() };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!(" (line {line}, column {column})")
}

#[cfg(test)]
mod tests;

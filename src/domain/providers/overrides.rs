//! The override form admins and members fill in for one model (tools, vision, reasoning,
//! context window, output limit, prices), checked field by field, and a model's facts in force
//! as the consoles show them.

use serde::{Deserialize, Serialize};

use super::{CapabilityOverride, Fact, split_alias};
use crate::domain::{DomainError, DomainResult};

/// The largest context window or output limit an admin may state (tokens).
const MAX_TOKENS: u32 = 100_000_000;
/// The highest price an admin may state (USD per million tokens).
const MAX_PRICE: f64 = 100_000.0;

/// The override form: empty fields leave the fact to the provider or the catalog.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct OverrideForm {
    /// The model id at this provider.
    #[serde(default)]
    pub model: String,
    /// `""`, `"yes"` or `"no"`.
    #[serde(default)]
    pub tools: String,
    /// As `tools`.
    #[serde(default)]
    pub vision: String,
    /// As `tools`.
    #[serde(default)]
    pub reasoning: String,
    /// Tokens.
    #[serde(default)]
    pub context_window: String,
    /// Tokens.
    #[serde(default)]
    pub max_output: String,
    /// USD per million input tokens.
    #[serde(default)]
    pub input_price: String,
    /// USD per million output tokens.
    #[serde(default)]
    pub output_price: String,
}

/// One model of a provider as the console shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ModelFacts {
    /// The model id.
    pub model: String,
    /// Every fact in force, with its source.
    pub facts: Vec<Fact>,
}

fn choice(value: &str, what: &str) -> DomainResult<Option<bool>> {
    match value.trim() {
        "" => Ok(None),
        "yes" => Ok(Some(true)),
        "no" => Ok(Some(false)),
        _ => Err(DomainError::Invalid(format!("Choose yes, no or “as discovered” for {what}."))),
    }
}

fn tokens(value: &str, what: &str) -> DomainResult<Option<u32>> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    value.parse::<u32>().ok().filter(|n| (1..=MAX_TOKENS).contains(n)).map(Some).ok_or_else(|| {
        DomainError::Invalid(format!("The {what} is a whole number of tokens from 1 to {MAX_TOKENS}."))
    })
}

fn price(value: &str, what: &str) -> DomainResult<Option<f64>> {
    let value = value.trim().trim_start_matches('$');
    if value.is_empty() {
        return Ok(None);
    }
    value.parse::<f64>().ok().filter(|p| p.is_finite() && (0.0..=MAX_PRICE).contains(p)).map(Some).ok_or_else(
        || DomainError::Invalid(format!("The {what} is dollars per million tokens, from 0 to {MAX_PRICE}.")),
    )
}

/// Parses the form; the model id and every field are checked.
pub fn parse(form: &OverrideForm) -> DomainResult<(String, CapabilityOverride)> {
    let model = form.model.trim();
    if model.is_empty() || model.len() > 200 || model.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(DomainError::Invalid(
            "Name the model as the provider does (at most 200 characters, no spaces).".into(),
        ));
    }
    let o = CapabilityOverride {
        tools: choice(&form.tools, "tools")?,
        vision: choice(&form.vision, "vision")?,
        reasoning: choice(&form.reasoning, "reasoning")?,
        context_window: tokens(&form.context_window, "context window")?,
        max_output: tokens(&form.max_output, "output limit")?,
        input_per_mtok: price(&form.input_price, "input price")?,
        output_per_mtok: price(&form.output_price, "output price")?,
    };
    if let (Some(window), Some(output)) = (o.context_window, o.max_output)
        && output > window
    {
        return Err(DomainError::Invalid("The output limit cannot exceed the context window.".into()));
    }
    Ok((split_alias(model).0.to_string(), o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_overrides_are_refused_with_a_reason() {
        let form = |f: fn(&mut OverrideForm)| {
            let mut form = OverrideForm { model: "llama3.2:latest".into(), ..OverrideForm::default() };
            f(&mut form);
            parse(&form)
        };
        assert_eq!(form(|_| {}).unwrap().1, CapabilityOverride::default());
        let ok = form(|f| {
            f.tools = "no".into();
            f.context_window = "131072".into();
            f.input_price = "$0.5".into();
        })
        .unwrap()
        .1;
        assert_eq!((ok.tools, ok.context_window, ok.input_per_mtok), (Some(false), Some(131_072), Some(0.5)));
        for (bad, needle) in [
            (form(|f| f.model = " ".into()), "Name the model"),
            (form(|f| f.model = "a b".into()), "no spaces"),
            (form(|f| f.tools = "maybe".into()), "tools"),
            (form(|f| f.context_window = "0".into()), "context window"),
            (form(|f| f.context_window = "-5".into()), "context window"),
            (form(|f| f.context_window = "999999999999".into()), "context window"),
            (form(|f| f.max_output = "1.5".into()), "output limit"),
            (form(|f| f.input_price = "NaN".into()), "input price"),
            (form(|f| f.output_price = "1e400".into()), "output price"),
            (
                form(|f| {
                    f.context_window = "1000".into();
                    f.max_output = "2000".into();
                }),
                "cannot exceed",
            ),
        ] {
            match bad {
                Err(DomainError::Invalid(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("expected a refusal naming {needle}: {other:?}"),
            }
        }
    }
}

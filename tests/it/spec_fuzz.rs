//! Property tests: random text, mutated sweep files and random well-formed sweeps never make
//! parsing or planning panic; every failure is an error value with a message.

use std::path::Path;

use pdsweep::plan::{Plan, PlanOptions};
use pdsweep::spec::Sweep;
use proptest::prelude::*;

const BASE: &str = include_str!("../../sweeps/quickstart.toml");

/// Parses and plans; returns whether it succeeded. Panics propagate and fail the test.
fn parse_and_plan(text: &str) -> bool {
    match Sweep::parse(Path::new("fuzz.toml"), text.to_string()) {
        Ok(sweep) => match Plan::build(&sweep, &PlanOptions::default()) {
            Ok(plan) => {
                let _ = pdsweep::plan::render(&plan, pdsweep::plan::PlanFormat::Json);
                true
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                false
            }
        },
        Err(e) => {
            assert!(!e.to_string().is_empty());
            false
        }
    }
}

/// Fragments that tend to break TOML or the schema in interesting ways.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("=".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("\"".to_string()),
        Just("\n".to_string()),
        Just("[]".to_string()),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("1e309".to_string()),
        Just("nan".to_string()),
        Just("\"1e15\"".to_string()),
        Just("\"0.5K\"".to_string()),
        Just("\"99999999T\"".to_string()),
        Just("\"all\"".to_string()),
        Just("{}".to_string()),
        Just("[[teachers.models]]\n".to_string()),
        Just("[constraints]\nrequire_teacher_larger = true\n".to_string()),
        Just("sizes".to_string()),
        Just("é".to_string()),
        "[a-z_]{1,8}".prop_map(|s| s),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|x| format!("{x:?}")),
    ]
}

/// Size strings, valid and not.
fn size_string() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => (10u32..3000, Just("K")).prop_map(|(n, s)| format!("\"{n}{s}\"")),
        4 => (1u32..20, Just("M")).prop_map(|(n, s)| format!("\"{n}{s}\"")),
        1 => Just("\"1T\"".to_string()),
        1 => Just("\"3\"".to_string()),
        1 => Just("\"1e14\"".to_string()),
        1 => any::<i32>().prop_map(|n| n.to_string()),
    ]
}

/// A list of one to three values, now and then an empty one.
fn list<S: Strategy<Value = String>>(s: S) -> impl Strategy<Value = String> {
    prop_oneof![
        15 => prop::collection::vec(s, 1..4),
        1 => Just(Vec::new()),
    ]
    .prop_map(|v| format!("[{}]", v.join(", ")))
}

/// A valid value most of the time, an invalid one now and then.
fn mostly(valid: &[&'static str], invalid: &[&'static str]) -> impl Strategy<Value = String> {
    let valid: Vec<String> = valid.iter().map(|s| s.to_string()).collect();
    let invalid: Vec<String> = invalid.iter().map(|s| s.to_string()).collect();
    prop_oneof![12 => prop::sample::select(valid), 1 => prop::sample::select(invalid)]
}

/// Random well-formed sweep files with random values.
fn random_sweep() -> impl Strategy<Value = String> {
    (
        list(size_string()),
        list(size_string()),
        list(prop_oneof![size_string(), (1u32..100).prop_map(|n| format!("\"{n}x\""))]),
        list(mostly(&["0.5", "1.0", "2.0"], &["-1.0", "0.0", "1e300"])),
        list(mostly(&["1", "50", "\"all\""], &["0", "-3", "\"none\""])),
        mostly(&["16", "128", "1"], &["\"1e15\"", "0"]),
        any::<bool>(),
        prop_oneof![Just("synthetic"), Just("text\"\npath = \"texts")],
    )
        .prop_map(|(teachers, students, tokens, temps, top_k, context, larger, corpus)| {
            format!(
                "name = \"r\"\n[corpus]\nkind = \"{corpus}\"\n[model]\ncontext = {context}\n[teachers]\nsizes = {teachers}\n\
                 [students]\nsizes = {students}\ntokens = {tokens}\n[distill]\ntemperature = {temps}\ntop_k = {top_k}\n\
                 [constraints]\nrequire_teacher_larger = {larger}\n"
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        parse_and_plan(&text);
    }

    #[test]
    fn mutated_sweeps_never_panic(
        cuts in prop::collection::vec((0usize..BASE.len(), 0usize..40, fragment()), 1..4)
    ) {
        let mut text = BASE.to_string();
        for (at, len, insert) in cuts {
            let mut start = at.min(text.len());
            while !text.is_char_boundary(start) { start -= 1; }
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) { end -= 1; }
            text.replace_range(start..end, &insert);
        }
        parse_and_plan(&text);
    }

    #[test]
    fn random_well_formed_sweeps_never_panic(text in random_sweep()) {
        parse_and_plan(&text);
    }
}

#[test]
fn the_unmutated_base_plans() {
    assert!(parse_and_plan(BASE));
}

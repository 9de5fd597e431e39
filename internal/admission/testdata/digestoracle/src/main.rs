// The oracle for digest_vectors.json: DevGuard's ExecutionMeaning v1 and
// admission fingerprint encodings, produced by serde_json itself from the
// struct definitions of DevGuard's crates/contract, field for field.
//
// Regenerate with `cargo run > raw.json`, then add "meaning_sha256" and
// "admission_sha256" (SHA-256 of the two encodings, lowercase hex) to
// each case.
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum EnforcementLevel { Accounted, Cooperative, Kernel }

#[derive(Serialize, Clone, Copy)]
struct Budget { cpu_milli: u64, memory_bytes: u64, tasks: u64 }

#[derive(Serialize, Clone, Copy)]
struct ResourceLevels { cpu: EnforcementLevel, memory: EnforcementLevel, pids: EnforcementLevel }

#[derive(Serialize, Clone)]
struct ResourceIntent { profile: String, requested: Budget, minimum: ResourceLevels }

#[derive(Serialize, Clone)]
struct ExecutionMeaning {
    executable_identity: String,
    cwd_identity: String,
    argv: Vec<String>,
    environment_changes: BTreeMap<String, String>,
    tty: bool,
    timeout_ms: u64,
    resources: ResourceIntent,
}

fn main() {
    let intent = |profile: &str, cpu, mem, tasks, min: [EnforcementLevel; 3]| ResourceIntent {
        profile: profile.into(),
        requested: Budget { cpu_milli: cpu, memory_bytes: mem, tasks },
        minimum: ResourceLevels { cpu: min[0], memory: min[1], pids: min[2] },
    };
    use EnforcementLevel::*;
    let cases: Vec<(&str, ExecutionMeaning)> = vec![
        ("plain", ExecutionMeaning {
            executable_identity: "cargo-sha256".into(),
            cwd_identity: "registered-root-1".into(),
            argv: vec!["cargo".into(), "test".into()],
            environment_changes: BTreeMap::from([("B".into(), "2".into()), ("A".into(), "1".into())]),
            tty: false, timeout_ms: 30_000,
            resources: intent("interactive", 1000, 2147483648, 64, [Cooperative, Accounted, Accounted]),
        }),
        ("html_characters", ExecutionMeaning {
            executable_identity: "/usr/bin/sh".into(),
            cwd_identity: "/home/dev/src/<webapp>&co".into(),
            argv: vec!["sh".into(), "-c".into(), "echo '<b>' && cat a>b & x=\"q\" \\ /".into()],
            environment_changes: BTreeMap::from([("HTML".into(), "<script>&amp;</script>".into())]),
            tty: true, timeout_ms: 1,
            resources: intent("coder", 250, 268435456, 32, [Accounted, Accounted, Accounted]),
        }),
        ("line_separators", ExecutionMeaning {
            executable_identity: "exe\u{2028}id".into(),
            cwd_identity: "cwd\u{2029}id".into(),
            argv: vec!["a\u{2028}b".into(), "\u{2029}".into(), "\u{85}next-line".into()],
            environment_changes: BTreeMap::new(),
            tty: false, timeout_ms: u64::MAX,
            resources: intent("my-agent", 1, 1, 1, [Kernel, Kernel, Kernel]),
        }),
        ("control_characters", ExecutionMeaning {
            executable_identity: "\u{0}\u{1}\u{7}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1b}\u{1f}\u{7f}".into(),
            cwd_identity: "tab\there\nnewline\rreturn".into(),
            argv: vec!["printf".into(), "\u{8}\u{c}".into(), "\u{1e}".into()],
            environment_changes: BTreeMap::from([("CTRL".into(), "\u{0}".into()), ("NL".into(), "\n".into())]),
            tty: true, timeout_ms: 600000,
            resources: intent("coder", 2000, 4294967296, 1024, [Kernel, Accounted, Kernel]),
        }),
        ("non_ascii", ExecutionMeaning {
            executable_identity: "/opt/café/bin/naïve".into(),
            cwd_identity: "/home/dév/日本語".into(),
            argv: vec!["écho".into(), "🦀".into(), "Ωmega".into(), "\u{feff}bom".into(), "\u{ffff}".into()],
            environment_changes: BTreeMap::from([
                ("é".into(), "accent".into()), ("z".into(), "last-ascii".into()), ("Z".into(), "upper".into()),
                ("_".into(), "underscore".into()), ("a".into(), "".into()), ("日本".into(), "語".into()),
            ]),
            tty: false, timeout_ms: 42,
            resources: intent("coder", 1600, 8589934592, 4096, [Cooperative, Kernel, Accounted]),
        }),
    ];
    // One JSON object per line: the inputs, and the exact bytes each
    // encoding produces. SHA-256 of those bytes is added by the caller.
    println!("[");
    let n = cases.len();
    for (i, (name, m)) in cases.into_iter().enumerate() {
        let meaning = serde_json::to_string(&("devguard-execution-v1", &m)).unwrap();
        let admission = serde_json::to_string(&(
            "devguard-admission-v1",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            &m.resources,
        ))
        .unwrap();
        let line = serde_json::json!({
            "name": name,
            "meaning": m,
            "meaning_encoding": meaning,
            "admission_digest": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "admission_encoding": admission,
        });
        println!("{}{}", line, if i + 1 < n { "," } else { "" });
    }
    println!("]");
}

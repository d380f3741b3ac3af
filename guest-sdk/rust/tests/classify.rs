//! The test kit's "how will the host classify this failure" against the
//! shared cases of wasm/abi/testdata/classify.txt, which the host's own
//! retry.Classify answers the same (internal/testbuild TestClassifyVectors).

use berth::messages::{ClassDesc, Description, Failure, FailureKind, HandlerDesc, RetrySettings};
use berth::testkit::{classify, Verdict};

fn list(s: &str) -> Vec<String> {
    if s == "-" {
        Vec::new()
    } else {
        s.split(',').map(String::from).collect()
    }
}

#[test]
fn the_test_kit_classifies_as_the_host() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wasm/abi/testdata/classify.txt");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {}", path, e));
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let col: Vec<&str> = line.split('\t').collect();
        assert_eq!(col.len(), 9, "classify.txt:{}: want 9 columns", i + 1);
        let classes = list(col[0])
            .into_iter()
            .map(|c| match c.split_once('<') {
                Some((name, parent)) => ClassDesc { name: name.into(), parent: parent.into() },
                None => ClassDesc { name: c, parent: String::new() },
            })
            .collect();
        let retry = |u: &str, r: &str| RetrySettings { unrecoverable: list(u), recoverable: list(r), ..RetrySettings::default() };
        let desc = Description {
            abi_version: 1,
            processor: "P".into(),
            kind: 1,
            retry: retry(col[1], col[2]),
            handlers: vec![HandlerDesc { name: "h".into(), event_types: vec!["E".into()], retry: retry(col[3], col[4]) }],
            classes,
            ..Description::default()
        };
        let kind = match col[5] {
            "1" => FailureKind::Systemic,
            "2" => FailureKind::Backpressure,
            _ => FailureKind::Unspecified,
        };
        let d = classify(&desc, "h", &Failure { kind, classes: list(col[6]), ..Failure::default() });
        let verdict = match d.verdict {
            Verdict::Recoverable => "recoverable",
            Verdict::Unrecoverable => "unrecoverable",
            Verdict::Systemic => "systemic",
            Verdict::Backpressure => "backpressure",
        };
        assert_eq!((verdict, &d.chain), (col[7], &list(col[8])), "classify.txt:{}: {} ({})", i + 1, line, d.reason);
        n += 1;
    }
    assert!(n > 10, "only {} cases", n);
}

//! The copier checker sees each violation it names, and nothing in a clean end state.

use super::*;

fn topic(records: &[(i32, i64, &str)]) -> FinalRead {
    let mut out = FinalRead::new();
    for (p, o, v) in records {
        out.entry(*p).or_default().push((*o, v.to_string()));
    }
    out
}

fn acked(values: &[(i32, &str)]) -> Vec<(i32, String)> {
    values.iter().map(|(p, v)| (*p, v.to_string())).collect()
}

fn kinds(v: &Violations) -> Vec<(&str, usize)> {
    v.counts.iter().map(|(k, n)| (k.as_str(), *n)).collect()
}

/// Input 0: 0-1 0-2 0-3; input 1: 1-1 1-2 (1-2's delivery failed, but it is in the topic).
fn clean() -> (Vec<(i32, String)>, CopierRead) {
    let input = topic(&[(0, 0, "0-1"), (0, 1, "0-2"), (0, 2, "0-3"), (1, 0, "1-1"), (1, 1, "1-2")]);
    // Output offsets leave gaps where commit markers and aborted batches sit.
    let output = topic(&[(0, 0, "0-1"), (0, 4, "0-2"), (0, 5, "0-3"), (1, 2, "1-1"), (1, 3, "1-2")]);
    let read = CopierRead {
        input,
        output,
        committed: vec![Some(3), Some(2), None],
        input_ends: vec![3, 2, 0],
        unstable: Vec::new(),
    };
    (acked(&[(0, "0-1"), (0, "0-2"), (0, "0-3"), (1, "1-1")]), read)
}

#[test]
fn a_clean_copy_has_no_violations() {
    let (acknowledged, read) = clean();
    let v = check_copier(&acknowledged, &read);
    assert_eq!(v.total(), 0, "{v:#?}");
}

#[test]
fn a_missing_value_is_lost() {
    let (acknowledged, mut read) = clean();
    read.output.get_mut(&0).expect("partition 0").remove(1); // 0-2
                                                             // An acknowledged value the input topic lost never reaches the output either.
    let acknowledged = [acknowledged, acked(&[(1, "1-3")])].concat();
    let v = check_copier(&acknowledged, &read);
    assert_eq!(kinds(&v), vec![("copier lost", 2)], "{v:#?}");
}

#[test]
fn a_value_copied_twice_is_a_duplicate() {
    let (acknowledged, mut read) = clean();
    read.output.get_mut(&1).expect("partition 1").push((7, "1-1".into()));
    let v = check_copier(&acknowledged, &read);
    assert_eq!(kinds(&v), vec![("copier duplicate", 1)], "{v:#?}");
}

#[test]
fn reordered_or_moved_values_break_the_order() {
    let (acknowledged, mut read) = clean();
    read.output.get_mut(&0).expect("partition 0").swap(1, 2); // 0-3 before 0-2
    let v = check_copier(&acknowledged, &read);
    assert_eq!(kinds(&v), vec![("copier order", 1)], "{v:#?}");

    let (acknowledged, mut read) = clean();
    let moved = read.output.get_mut(&1).expect("partition 1").remove(1); // 1-2 to output 0
    read.output.get_mut(&0).expect("partition 0").push((9, moved.1));
    let v = check_copier(&acknowledged, &read);
    assert_eq!(kinds(&v), vec![("copier order", 1)], "{v:#?}");
}

#[test]
fn a_value_nobody_fed_is_a_phantom() {
    let (acknowledged, mut read) = clean();
    read.output.get_mut(&1).expect("partition 1").push((8, "1-99".into()));
    let v = check_copier(&acknowledged, &read);
    assert_eq!(kinds(&v), vec![("copier phantom", 1)], "{v:#?}");
}

#[test]
fn committed_offsets_behind_the_input_are_reported() {
    let (acknowledged, mut read) = clean();
    read.committed[1] = Some(1);
    let v = check_copier(&acknowledged, &read);
    assert_eq!(kinds(&v), vec![("copier offsets", 1)], "{v:#?}");
    read.committed[1] = None;
    assert_eq!(kinds(&check_copier(&acknowledged, &read)), vec![("copier offsets", 1)]);
}

//! The checkout check fed each violation by hand, and a clean run it must pass.

use std::time::Duration;

use super::*;

const RUN: &str = "r1";

fn attempt(order: &Order, outcome: Outcome) -> Txn {
    Txn {
        writer: "transactional".into(),
        values: vec![(0, order.order_value()), (0, order.inventory_value())],
        outcome,
        deliberate_abort: false,
        started: Duration::ZERO,
        ended: Duration::ZERO,
    }
}

fn read(values: &[String]) -> FinalRead {
    let records = values.iter().enumerate().map(|(i, v)| (i as i64, v.clone())).collect();
    FinalRead::from([(0, records)])
}

fn kinds(v: &Violations) -> Vec<&str> {
    v.counts.keys().map(String::as_str).collect()
}

#[test]
fn committed_pairs_and_a_retried_abort_pass() {
    let (a, b) = (Order::new(RUN, 't', 0, 0), Order::new(RUN, 't', 1, 0));
    let b_retry = Order { attempt: 1, ..b.clone() };
    let attempts = [
        attempt(&a, Outcome::Committed),
        attempt(&b, Outcome::Aborted),
        attempt(&b_retry, Outcome::Committed),
    ];
    let orders = read(&[a.order_value(), b_retry.order_value()]);
    let inventory = read(&[b_retry.inventory_value(), a.inventory_value()]);
    let (v, seen) = check_checkout(RUN, &attempts, &orders, &inventory);
    assert_eq!(v.total(), 0, "{v:?}");
    assert_eq!(seen, CheckoutSeen { orders: 2, inventory: 2, matched: 2, unknown_visible: 0 });
}

#[test]
fn an_order_without_its_stock_change_is_unpaired_and_lost() {
    let a = Order::new(RUN, 'a', 0, 0);
    let (v, _) =
        check_checkout(RUN, &[attempt(&a, Outcome::Committed)], &read(&[a.order_value()]), &read(&[]));
    assert_eq!(kinds(&v), ["lost", "unpaired"]);
}

#[test]
fn an_unknown_attempt_may_be_absent_but_not_torn() {
    let a = Order::new(RUN, 'a', 0, 0);
    let unknown = [attempt(&a, Outcome::Unknown)];
    let (v, seen) = check_checkout(RUN, &unknown, &read(&[]), &read(&[]));
    assert_eq!((v.total(), seen.unknown_visible), (0, 0));
    let (v, seen) = check_checkout(RUN, &unknown, &read(&[a.order_value()]), &read(&[a.inventory_value()]));
    assert_eq!((v.total(), seen.unknown_visible), (0, 1));
    let (v, _) = check_checkout(RUN, &unknown, &read(&[]), &read(&[a.inventory_value()]));
    assert_eq!(kinds(&v), ["unpaired"]);
}

#[test]
fn a_visible_aborted_attempt_is_reported() {
    let a = Order::new(RUN, 't', 0, 0);
    let (v, _) = check_checkout(
        RUN,
        &[attempt(&a, Outcome::Aborted)],
        &read(&[a.order_value()]),
        &read(&[a.inventory_value()]),
    );
    assert_eq!(kinds(&v), ["aborted visible"]);
}

#[test]
fn a_second_record_of_an_order_is_a_duplicate() {
    let a = Order::new(RUN, 't', 0, 0);
    let again = Order { attempt: 1, ..a.clone() };
    let attempts = [attempt(&a, Outcome::Committed), attempt(&again, Outcome::Unknown)];
    let orders = read(&[a.order_value(), again.order_value()]);
    let inventory = read(&[a.inventory_value(), again.inventory_value()]);
    let (v, _) = check_checkout(RUN, &attempts, &orders, &inventory);
    assert_eq!(v.counts.get("duplicate"), Some(&2), "{v:?}");
}

#[test]
fn a_stock_change_of_another_quantity_is_a_mismatch() {
    let a = Order::new(RUN, 't', 0, 0);
    let wrong = Order { quantity: a.quantity + 1, ..a.clone() };
    let attempts = [attempt(&a, Outcome::Committed), attempt(&wrong, Outcome::Unknown)];
    let (v, _) = check_checkout(RUN, &attempts, &read(&[a.order_value()]), &read(&[wrong.inventory_value()]));
    assert_eq!(kinds(&v), ["lost", "mismatch"]);
}

#[test]
fn records_nobody_sent_are_phantoms_and_other_runs_are_ignored() {
    let a = Order::new(RUN, 't', 0, 0);
    let earlier = Order::new("r0", 't', 0, 0);
    let orders = read(&[a.order_value(), earlier.order_value()]);
    let inventory = read(&[a.inventory_value(), format!("{RUN}-t000009 garbage")]);
    let (v, seen) = check_checkout(RUN, &[attempt(&a, Outcome::Committed)], &orders, &inventory);
    assert_eq!(kinds(&v), ["phantom"]);
    assert_eq!((seen.orders, seen.inventory, seen.matched), (1, 2, 1));
}

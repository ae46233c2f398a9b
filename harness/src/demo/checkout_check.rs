//! The checkout demo's records and its check.
//!
//! Every attempt to place order `n` writes two records, one to `orders` and one to
//! `inventory`, both naming the order and the attempt:
//!
//! ```text
//! orders:    <run>-<writer><n> sku=widget-<k> qty=<q> try=<t>
//! inventory: <run>-<writer><n> sku=widget-<k> delta=-<q> try=<t>
//! ```
//!
//! The check reads both topics under read_committed and holds what the writers were told
//! (each attempt's [`Txn`]) against what is there: every order has exactly its inventory record
//! and the other way round (`unpaired`, `mismatch`), no order is there twice (`duplicate`), no
//! aborted attempt is visible (`aborted visible`), every acknowledged one is (`lost`), nothing
//! is there that no writer sent (`phantom`). An attempt whose outcome is unknown may be there
//! or not, but only both records or neither. A pure function of its inputs, so its unit tests
//! feed it each violation by hand.

use std::collections::{BTreeMap, BTreeSet};

use crate::chaos::checker::{FinalRead, Violations};
use crate::chaos::history::{Outcome, Txn};

/// One attempt at placing one order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub id: String,
    pub sku: String,
    pub quantity: u32,
    pub attempt: u32,
}

/// Different skus and quantities, so a record paired with the wrong one shows.
const SKUS: u64 = 7;
const QUANTITY_MAX: u64 = 3;

impl Order {
    /// Attempt `attempt` of order `n` of `writer` (one letter) in run `run`.
    pub fn new(run: &str, writer: char, n: u64, attempt: u32) -> Order {
        Order {
            id: format!("{run}-{writer}{n:06}"),
            sku: format!("widget-{}", n % SKUS),
            quantity: 1 + (n % QUANTITY_MAX) as u32,
            attempt,
        }
    }

    pub fn order_value(&self) -> String {
        format!("{} sku={} qty={} try={}", self.id, self.sku, self.quantity, self.attempt)
    }

    pub fn inventory_value(&self) -> String {
        format!("{} sku={} delta=-{} try={}", self.id, self.sku, self.quantity, self.attempt)
    }
}

/// Parses either record back into its order (None: not a checkout record).
fn parse(value: &str) -> Option<Order> {
    let mut words = value.split(' ');
    let id = words.next()?.to_string();
    let sku = words.next()?.strip_prefix("sku=")?.to_string();
    let amount = words.next()?;
    let quantity = amount.strip_prefix("qty=").or_else(|| amount.strip_prefix("delta=-"))?.parse().ok()?;
    let attempt = words.next()?.strip_prefix("try=")?.parse().ok()?;
    words.next().is_none().then_some(Order { id, sku, quantity, attempt })
}

/// What the check saw, for the summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CheckoutSeen {
    /// This run's records in `orders` and in `inventory`.
    pub orders: usize,
    pub inventory: usize,
    /// Orders with exactly one order record and one matching inventory record.
    pub matched: usize,
    /// Attempts with an unknown outcome that turned out to be there.
    pub unknown_visible: usize,
}

/// Checks the run `run`'s records in both topics (others are an earlier run's) against the
/// writers' attempts.
pub fn check_checkout(
    run: &str,
    attempts: &[Txn],
    orders: &FinalRead,
    inventory: &FinalRead,
) -> (Violations, CheckoutSeen) {
    let mut v = Violations::default();
    let mut seen = CheckoutSeen::default();
    let prefix = format!("{run}-");
    let ours = |read: &FinalRead| -> Vec<String> {
        read.values()
            .flatten()
            .filter(|(_, value)| value.starts_with(&prefix))
            .map(|(_, s)| s.clone())
            .collect()
    };
    let (order_values, inventory_values) = (ours(orders), ours(inventory));
    seen.orders = order_values.len();
    seen.inventory = inventory_values.len();
    let order_records = by_id(&order_values, "orders", &mut v);
    let inventory_records = by_id(&inventory_values, "inventory", &mut v);

    for (id, order) in &order_records {
        match inventory_records.get(id) {
            None => v.add("unpaired", format!("order {id} has no inventory record")),
            Some(stock) if stock != order => {
                v.add("mismatch", format!("order {order:?} but inventory {stock:?}"))
            }
            Some(_) => seen.matched += 1,
        }
    }
    for id in inventory_records.keys().filter(|id| !order_records.contains_key(*id)) {
        v.add("unpaired", format!("inventory record of {id} has no order"));
    }

    let visible: BTreeSet<&str> = order_values.iter().chain(&inventory_values).map(String::as_str).collect();
    let mut sent = BTreeSet::new();
    for attempt in attempts {
        let values: Vec<&str> = attempt.values.iter().map(|(_, value)| value.as_str()).collect();
        sent.extend(values.iter().copied());
        let there = values.iter().filter(|value| visible.contains(**value)).count();
        match attempt.outcome {
            Outcome::Aborted if there > 0 => {
                v.add("aborted visible", format!("{values:?} of an aborted attempt are visible"))
            }
            Outcome::Committed if there < values.len() => {
                v.add("lost", format!("acknowledged {values:?}: {there} of {} visible", values.len()))
            }
            Outcome::Unknown if there > 0 => seen.unknown_visible += 1,
            _ => {}
        }
    }
    for value in visible.iter().filter(|value| !sent.contains(**value)) {
        v.add("phantom", format!("{value:?} was never sent"));
    }
    (v, seen)
}

/// Records of one topic by order id; a second record of an order is a duplicate. A record
/// that does not parse is skipped here: no writer sent it, so it is reported as a phantom.
fn by_id(values: &[String], topic: &str, v: &mut Violations) -> BTreeMap<String, Order> {
    let mut out = BTreeMap::new();
    for value in values {
        let Some(order) = parse(value) else { continue };
        if let Some(earlier) = out.insert(order.id.clone(), order) {
            v.add("duplicate", format!("{topic}: {value:?} after {earlier:?}"));
        }
    }
    out
}

#[cfg(test)]
#[path = "checkout_check_tests.rs"]
mod tests;

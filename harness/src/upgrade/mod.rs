//! Upgrades from an earlier onelog release (issue 33).
//!
//! - `fixture`: how the golden data set's cluster runs (fixed ports, SASL, the authorizer) and
//!   its node archives (`harness/fixtures/<release>/node-<id>.tar.gz`);
//! - `manifest`: what the fixture holds, as JSON beside the archives, and how two states differ;
//! - `populate`: writing the data set onto the old release's cluster with stock clients;
//! - `observe`, `observe_admin`: reading it back from any build's cluster;
//! - `verify`: a build's cluster against the manifest, logins and ACLs included;
//! - `make`: making a fixture from an old release;
//! - `roll`, `roll_group`: the rolling upgrade from the old release to this build under load,
//!   and its consumer group.

pub mod fixture;
pub mod make;
pub mod manifest;
pub mod observe;
mod observe_admin;
pub mod populate;
pub mod roll;
pub mod roll_group;
pub mod verify;

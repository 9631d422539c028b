//! placeholder docs
pub mod campaign;
pub mod disk;
pub mod geometries;
pub mod model;
pub mod rng;
pub mod sim;

pub use campaign::{run_one, run_plan, Plan, Summary};
pub use sim::{Config, Failure, Invariant, Mode, Mutation, Report, Scenario};

/// Engine bugs the simulation found, and the guards that keep the default campaign clear of
/// them until they are fixed. `URAID_SIM_EXPOSE_KNOWN_BUGS=1` switches the guards off.
pub const KNOWN_BUGS: &str = "see the crate documentation";

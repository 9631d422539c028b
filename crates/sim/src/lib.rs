//! placeholder docs
pub mod campaign;
pub mod disk;
pub mod geometries;
pub mod model;
pub mod rng;
pub mod sim;

pub use campaign::{run_one, run_plan, Plan, Summary};
pub use sim::{Config, Failure, Invariant, Mode, Mutation, Report, Scenario};

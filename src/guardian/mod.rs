//! TODO
pub mod decision;

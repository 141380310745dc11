//! Teams: groups of people (made in the console or synced from the identity provider), the
//! second kind of subject access is granted to beside the person.

pub mod groups;

pub use crate::model::teams::Group;

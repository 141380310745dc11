//! HTTP handlers, one file per area: extract, authorize, call one service, render.
pub mod assets;
pub mod events;
pub mod health;
pub mod home;

//! Where extracted knowledge comes from: webpages fetched from the web and uploaded
//! documents, turned into clean text sections and then into Q&A pairs.

pub mod bounded;
pub mod documents;
pub mod fetch;
pub mod html;
pub mod llm;
pub mod pdf;
pub mod qa;
pub mod robots;

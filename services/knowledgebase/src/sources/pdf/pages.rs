//! Step 2: the pages of the loaded file, counted with the instructions each takes to read
//! (forms included, as often as they are drawn) before the library reads any: it holds every
//! instruction of a page in memory, and follows a looping form or page tree until the stack
//! overflows, which aborts the process.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use pdf_extract::{Dictionary, Document, Object, ObjectId};

use super::filters::{decode, filters, is_unread};
use super::tokens::Tokens;
use crate::sources::bounded::{Limits, MAX_PDF_PAGES};

/// Empties image and attached-file streams: text extraction has no use for them, and the
/// PDF reader would decode an image a page draws and read its pixels as drawing instructions.
pub(super) fn drop_unread(document: &mut Document) {
    for object in document.objects.values_mut() {
        if let Object::Stream(stream) = object
            && is_unread(&stream.dict)
        {
            stream.set_plain_content(Vec::new());
        }
    }
}

/// How deep a page may sit in its page tree (the library's own bound on page trees).
const MAX_PAGE_TREE_DEPTH: usize = 256;

/// A page and its ancestors, as the PDF reader climbs them for what a page inherits: its
/// `get_inherited` follows `Parent` recursively and without an end, so a loop, or a climb
/// deeper than the library's bound on page trees, is refused rather than overflow the stack.
fn ancestry<'d>(document: &'d Document, page: &'d Dictionary) -> Result<Vec<&'d Dictionary>, String> {
    let mut chain = vec![page];
    let mut seen = HashSet::new();
    let mut current = page;
    while let Ok(parent) = current.get(b"Parent").and_then(Object::as_reference) {
        if !seen.insert(parent) || chain.len() > MAX_PAGE_TREE_DEPTH {
            return Err("the page tree of the PDF loops or is too deep".to_owned());
        }
        let Ok(next) = document.get_dictionary(parent) else { break };
        chain.push(next);
        current = next;
    }
    Ok(chain)
}

fn deref<'d>(document: &'d Document, object: &'d Object) -> Option<&'d Object> {
    match object {
        Object::Reference(id) => document.get_object(*id).ok(),
        other => Some(other),
    }
}

#[derive(Default)]
struct StreamCost {
    tokens: u64,
    draws: Vec<(Vec<u8>, u64)>,
}

struct Pages<'d> {
    document: &'d Document,
    limits: &'d Limits,
    streams: HashMap<ObjectId, Rc<StreamCost>>,
    /// Form and resources (by address: the document does not change meanwhile) to the
    /// instructions drawing the form takes.
    forms: HashMap<(ObjectId, usize), u64>,
    drawing: Vec<ObjectId>,
}

/// Checks the pages of the loaded file: their number, and the instructions each takes to
/// read and all of them do.
pub(super) fn check_pages(document: &Document, limits: &Limits) -> Result<(), String> {
    let pages: Vec<ObjectId> = document.page_iter().take(MAX_PDF_PAGES + 1).collect();
    if pages.len() > MAX_PDF_PAGES {
        return Err(format!("the PDF has more than {MAX_PDF_PAGES} pages (the limit)"));
    }
    let mut walk = Pages { document, limits, streams: HashMap::new(), forms: HashMap::new(), drawing: Vec::new() };
    let mut total = 0u64;
    for (index, page_id) in pages.iter().enumerate() {
        let Ok(page) = document.get_dictionary(*page_id) else { continue };
        // The first dictionary up the tree, as the reader takes it.
        let resources = ancestry(document, page)?.into_iter().find_map(|node| {
            node.get(b"Resources").ok().and_then(|r| deref(document, r)).and_then(|r| r.as_dict().ok())
        });
        let mut cost = 0u64;
        for content in document.get_page_contents(*page_id) {
            cost = cost.saturating_add(walk.cost(content, resources, 0)?);
            if cost > limits.pdf_page_tokens {
                return Err(format!(
                    "page {} of the PDF takes more than {} drawing instructions to read (the limit per page)",
                    index + 1,
                    limits.pdf_page_tokens
                ));
            }
        }
        total = total.saturating_add(cost);
        if total > limits.pdf_tokens {
            return Err(format!(
                "the PDF takes more than {} drawing instructions to read (the limit)",
                limits.pdf_tokens
            ));
        }
    }
    Ok(())
}

impl<'d> Pages<'d> {
    /// The tokens of a content stream or form, and the forms it draws, decoded once.
    fn stream(&mut self, id: ObjectId) -> Result<Rc<StreamCost>, String> {
        if let Some(cost) = self.streams.get(&id) {
            return Ok(cost.clone());
        }
        let cost = match self.document.get_object(id) {
            Ok(Object::Stream(stream)) => {
                let cap = self.limits.pdf_page_tokens;
                let mut tokens = Tokens::new(cap);
                // As the PDF reader: decoded when it has filters, the raw data if decoding fails.
                let filters = filters(&stream.dict);
                let params = stream.dict.get(b"DecodeParms").and_then(Object::as_dict).ok();
                let decoded =
                    decode(&filters, params, &stream.content, self.limits.pdf_stream_bytes, Some(&mut tokens))
                        .map_err(|over| over.0)?;
                if decoded.failed {
                    let mut raw = Tokens::new(cap);
                    decode(&[], None, &stream.content, self.limits.pdf_stream_bytes, Some(&mut raw))
                        .map_err(|over| over.0)?;
                    if raw.count > tokens.count {
                        tokens = raw;
                    }
                }
                StreamCost { tokens: tokens.count, draws: tokens.draws.into_iter().collect() }
            }
            _ => StreamCost::default(),
        };
        let cost = Rc::new(cost);
        self.streams.insert(id, cost.clone());
        Ok(cost)
    }

    /// The instructions reading stream `id` with `resources` takes, the forms it draws
    /// included (each time it draws them).
    fn cost(&mut self, id: ObjectId, resources: Option<&'d Dictionary>, depth: usize) -> Result<u64, String> {
        let stream = self.stream(id)?;
        let mut cost = stream.tokens;
        for (name, times) in &stream.draws {
            let Some((form, form_resources)) = self.form(name, resources) else { continue };
            let key = (form, form_resources.map_or(0, |r| std::ptr::from_ref(r) as usize));
            let each = match self.forms.get(&key) {
                Some(each) => *each,
                None => {
                    if depth + 1 > self.limits.pdf_form_depth {
                        return Err(format!(
                            "the PDF nests forms deeper than {} (the limit)",
                            self.limits.pdf_form_depth
                        ));
                    }
                    if self.drawing.contains(&form) {
                        return Err("a form of the PDF draws itself".to_owned());
                    }
                    self.drawing.push(form);
                    let each = self.cost(form, form_resources, depth + 1);
                    self.drawing.pop();
                    let each = each?;
                    self.forms.insert(key, each);
                    each
                }
            };
            cost = cost.saturating_add(each.saturating_mul(*times));
            if cost > self.limits.pdf_page_tokens {
                return Ok(cost);
            }
        }
        Ok(cost)
    }

    /// The form `/name Do` draws with `resources`, and the resources it is read with: its
    /// own, else those it was drawn with.
    fn form(&self, name: &[u8], resources: Option<&'d Dictionary>) -> Option<(ObjectId, Option<&'d Dictionary>)> {
        let document = self.document;
        let xobjects = deref(document, resources?.get(b"XObject").ok()?)?.as_dict().ok()?;
        let id = xobjects.get(name).ok()?.as_reference().ok()?;
        let stream = document.get_object(id).ok()?.as_stream().ok()?;
        let own = stream.dict.get(b"Resources").ok().and_then(|r| deref(document, r)).and_then(|r| r.as_dict().ok());
        Some((id, own.or(resources)))
    }
}

#[cfg(test)]
mod tests {
    use pdf_extract::{Dictionary, Object, Stream};

    use crate::sources::pdf::fixtures::{Builder, dict, flate_stream, name, read, text};

    #[test]
    fn a_page_drawing_a_form_many_times_is_counted_each_time() {
        let mut builder = Builder::new();
        let form_content = "0 0 m 10 10 l S\n".repeat(20).into_bytes();
        let form = builder.add(Stream::new(dict(&[("Subtype", name("Form"))]), form_content));
        let draws = "/Fm0 Do\n".repeat(200);
        let xobjects = dict(&[("Fm0", Object::Reference(form))]);
        builder.page(flate_stream(&[text("Drawn.").as_slice(), b"\n", draws.as_bytes()].concat()), xobjects);
        let reason = read(&builder.bytes()).unwrap_err();
        assert_eq!(reason, "page 1 of the PDF takes more than 10000 drawing instructions to read (the limit per page)");
    }

    #[test]
    fn a_form_drawing_itself_is_refused_rather_than_read_forever() {
        let mut builder = Builder::new();
        let form = builder.document.new_object_id();
        let resources = dict(&[("XObject", Object::Dictionary(dict(&[("Me", Object::Reference(form))])))]);
        let looping = Stream::new(
            dict(&[("Subtype", name("Form")), ("Resources", Object::Dictionary(resources))]),
            b"/Me Do".to_vec(),
        );
        builder.document.objects.insert(form, Object::Stream(looping));
        builder.page(flate_stream(b"/Fm0 Do"), dict(&[("Fm0", Object::Reference(form))]));
        assert_eq!(read(&builder.bytes()).unwrap_err(), "a form of the PDF draws itself");
    }

    #[test]
    fn a_page_tree_that_loops_is_refused_rather_than_climbed_forever() {
        let mut builder = Builder::new();
        builder.page(flate_stream(&text("Inherits.")), Dictionary::new());
        let page = builder.kids[0].as_reference().unwrap();
        let pages = builder.pages;
        let document = builder.finish();
        // The page inherits its resources, and the tree above it leads back to it.
        document.get_object_mut(page).unwrap().as_dict_mut().unwrap().remove(b"Resources").unwrap();
        document.get_object_mut(pages).unwrap().as_dict_mut().unwrap().set("Parent", Object::Reference(page));
        let mut bytes = Vec::new();
        document.save_to(&mut bytes).unwrap();
        assert_eq!(read(&bytes).unwrap_err(), "the page tree of the PDF loops or is too deep");
    }
}

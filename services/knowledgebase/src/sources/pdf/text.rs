//! Step 3: the text, page by page, written through the library's own plain-text output into a
//! sink that stops at the cap, so that a file whose text is too long is refused without ever
//! being held whole. Each line written keeps the largest font size drawn on it, which tells
//! headings from body text (issue 55).

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use pdf_extract::{ConvertToFmt, Document, MediaBox, OutputDev, OutputError, PlainTextOutput, Transform};

use crate::sources::bounded::{Limits, size};

/// A line of a page's text and the largest font size (in points, as drawn) of its characters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Line {
    pub text: String,
    pub size: f64,
}

/// The text written so far, one string per page begun.
#[derive(Default)]
struct Written {
    pages: Vec<String>,
    /// The same text as lines, one list per page begun.
    lines: Vec<Vec<Line>>,
    /// The font size of the character being written.
    size_now: f64,
    /// Pages the reader finished.
    finished: usize,
    bytes: u64,
    cap: u64,
    over: bool,
}

/// Where the PDF reader's plain-text output writes: the current page, within the cap.
#[derive(Clone)]
struct Sink(Rc<RefCell<Written>>);

impl fmt::Write for Sink {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut written = self.0.borrow_mut();
        let bytes = written.bytes.saturating_add(text.len() as u64);
        if written.over || bytes > written.cap {
            written.over = true;
            return Err(fmt::Error);
        }
        written.bytes = bytes;
        if let Some(page) = written.pages.last_mut() {
            page.push_str(text);
        }
        let size = written.size_now;
        if let Some(lines) = written.lines.last_mut() {
            for (index, piece) in text.split('\n').enumerate() {
                if index > 0 || lines.is_empty() {
                    lines.push(Line::default());
                }
                if let Some(line) = lines.last_mut().filter(|_| !piece.is_empty()) {
                    line.text.push_str(piece);
                    line.size = line.size.max(size);
                }
            }
        }
        Ok(())
    }
}

impl ConvertToFmt for Sink {
    type Writer = Sink;

    fn convert(self) -> Sink {
        self
    }
}

/// The reader's own plain-text output, started afresh on each page as its page-by-page
/// extraction does, writing into [`Sink`].
struct Paged {
    sink: Sink,
    page: Option<PlainTextOutput<Sink>>,
}

impl OutputDev for Paged {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        {
            let mut written = self.sink.0.borrow_mut();
            written.pages.push(String::new());
            written.lines.push(Vec::new());
        }
        let mut page = PlainTextOutput::new(self.sink.clone());
        page.begin_page(page_num, media_box, art_box)?;
        self.page = Some(page);
        Ok(())
    }

    fn end_page(&mut self) -> Result<(), OutputError> {
        if let Some(page) = self.page.as_mut() {
            page.end_page()?;
        }
        self.sink.0.borrow_mut().finished += 1;
        Ok(())
    }

    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        // The size as drawn, as the plain-text output reckons it: the side of the square of the
        // transformed size's area.
        let (x, y) = (font_size * (trm.m11 + trm.m21), font_size * (trm.m12 + trm.m22));
        self.sink.0.borrow_mut().size_now = (x * y).abs().sqrt();
        match self.page.as_mut() {
            Some(page) => page.output_character(trm, width, spacing, font_size, char),
            None => Ok(()),
        }
    }

    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.page.as_mut().map_or(Ok(()), OutputDev::begin_word)
    }

    fn end_word(&mut self) -> Result<(), OutputError> {
        self.page.as_mut().map_or(Ok(()), OutputDev::end_word)
    }

    fn end_line(&mut self) -> Result<(), OutputError> {
        self.page.as_mut().map_or(Ok(()), OutputDev::end_line)
    }
}

/// The text of each page, as lines. As pdf-extract's page-by-page extraction: the pages
/// before one that cannot be read are kept, the rest dropped.
pub(super) fn extract(document: &Document, limits: &Limits) -> Result<Vec<Vec<Line>>, String> {
    let written = Rc::new(RefCell::new(Written { cap: limits.text_bytes, ..Written::default() }));
    let mut paged = Paged { sink: Sink(written.clone()), page: None };
    let outcome = pdf_extract::output_doc(document, &mut paged);
    drop(paged);
    let mut written = written.take();
    if written.over {
        return Err(format!("the text of the document is longer than {} (the limit)", size(limits.text_bytes)));
    }
    if outcome.is_err() {
        written.lines.truncate(written.finished);
    }
    Ok(written.lines)
}

#[cfg(test)]
mod tests {
    use pdf_extract::Dictionary;

    use crate::sources::pdf::fixtures::{Builder, flate_stream, read, text};

    #[test]
    fn the_text_is_capped() {
        let mut builder = Builder::new();
        for _ in 0..50 {
            builder.page(flate_stream(&text(&"Lorem ipsum dolor sit amet. ".repeat(4))), Dictionary::new());
        }
        assert_eq!(read(&builder.bytes()).unwrap_err(), "the text of the document is longer than 4 KiB (the limit)");
    }
}

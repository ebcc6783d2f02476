//! HTML to clean text, in sections. What a reader of the page would take for its content:
//! the `main` or `article` element when there is one, without scripts, styles, navigation,
//! headers and footers, forms, hidden elements and cookie or consent banners. A heading
//! starts a new section; block elements end lines.

use ego_tree::NodeRef;
use scraper::{Html, Node, Selector};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The heading that opens the section; `None` for text before the first heading.
    pub heading: Option<String>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    pub title: Option<String>,
    pub sections: Vec<Section>,
}

const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "canvas", "nav", "header", "footer", "aside", "form", "iframe",
    "button", "select", "input", "textarea", "object", "embed", "dialog", "menu",
];
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "table",
    "tr",
    "td",
    "th",
    "br",
    "blockquote",
    "pre",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "hr",
];
/// Class, id or aria words that mark boilerplate a page shows over or around its content.
const BOILERPLATE_MARKS: &[&str] = &[
    "cookie",
    "consent",
    "gdpr",
    "banner",
    "newsletter",
    "popup",
    "modal",
    "navbar",
    "breadcrumb",
    "skip-link",
    "sidebar",
];

fn is_heading(name: &str) -> bool {
    matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6")
}

fn is_boilerplate(element: &scraper::node::Element) -> bool {
    if SKIPPED.contains(&element.name()) || element.attr("hidden").is_some() {
        return true;
    }
    if element.attr("aria-hidden") == Some("true")
        || matches!(element.attr("role"), Some("navigation" | "banner" | "contentinfo" | "dialog" | "alertdialog"))
    {
        return true;
    }
    if element.attr("style").is_some_and(|style| style.replace(' ', "").contains("display:none")) {
        return true;
    }
    let marks = [element.attr("id"), element.attr("class"), element.attr("aria-label")];
    marks.iter().flatten().any(|value| {
        let value = value.to_ascii_lowercase();
        BOILERPLATE_MARKS.iter().any(|mark| value.contains(mark))
    })
}

struct Builder {
    sections: Vec<Section>,
    heading: Option<String>,
    text: String,
}

impl Builder {
    fn push_text(&mut self, text: &str) {
        let mut words = text.split_whitespace().peekable();
        if words.peek().is_none() {
            if !text.is_empty() && !self.text.ends_with([' ', '\n']) && !self.text.is_empty() {
                self.text.push(' ');
            }
            return;
        }
        if text.starts_with(char::is_whitespace) && !self.text.is_empty() && !self.text.ends_with([' ', '\n']) {
            self.text.push(' ');
        }
        let joined: Vec<&str> = words.collect();
        self.text.push_str(&joined.join(" "));
        if text.ends_with(char::is_whitespace) {
            self.text.push(' ');
        }
    }

    fn end_line(&mut self) {
        let trimmed = self.text.trim_end_matches(' ').len();
        self.text.truncate(trimmed);
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push('\n');
        }
    }

    fn flush(&mut self) {
        let text = tidy(&self.text);
        if !text.is_empty() || self.heading.is_some() {
            self.sections.push(Section { heading: self.heading.take(), text });
        }
        self.text.clear();
    }
}

/// Collapses spaces, trims lines, keeps paragraphs apart by one newline.
fn tidy(text: &str) -> String {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn inline_text(node: NodeRef<'_, Node>) -> String {
    let mut out = String::new();
    for descendant in node.descendants() {
        if let Node::Text(text) = descendant.value() {
            out.push_str(text);
            out.push(' ');
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn walk(node: NodeRef<'_, Node>, builder: &mut Builder) {
    match node.value() {
        Node::Text(text) => builder.push_text(text),
        Node::Element(element) => {
            if is_boilerplate(element) {
                return;
            }
            let name = element.name();
            if is_heading(name) {
                builder.flush();
                let heading = inline_text(node);
                builder.heading = (!heading.is_empty()).then_some(heading);
                return;
            }
            let block = BLOCKS.contains(&name);
            if block {
                builder.end_line();
            }
            for child in node.children() {
                walk(child, builder);
            }
            if block {
                builder.end_line();
            }
        }
        _ => {}
    }
}

pub fn extract(html: &str) -> Page {
    let document = Html::parse_document(html);
    let title = Selector::parse("title")
        .ok()
        .and_then(|selector| document.select(&selector).next().map(|t| inline_text(*t)))
        .filter(|t| !t.is_empty());
    let root = ["main", "article", "[role=main]", "body"]
        .iter()
        .filter_map(|css| Selector::parse(css).ok())
        .find_map(|selector| document.select(&selector).next())
        .map_or_else(|| *document.root_element(), |element| *element);
    let mut builder = Builder { sections: Vec::new(), heading: None, text: String::new() };
    for child in root.children() {
        walk(child, &mut builder);
    }
    builder.flush();
    let sections = builder.sections.into_iter().filter(|s| !s.text.is_empty()).collect();
    Page { title, sections }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!doctype html><html><head><title>Acme Dental</title>
        <style>body { color: red }</style><script>var tracking = "do not index";</script></head>
        <body>
          <nav><a href="/">Home</a><a href="/about">About</a></nav>
          <div id="cookie-banner">We use cookies. <button>Accept</button></div>
          <header><h1>Site header</h1></header>
          <main>
            <h1>Welcome</h1>
            <p>We are a family practice in   Springfield.</p>
            <h2>Opening hours</h2>
            <ul><li>Monday to Friday: 8 am to 6 pm</li><li>Saturday: 9 am to <b>noon</b></li></ul>
            <div class="newsletter-popup">Subscribe!</div>
            <h2>Do you take new patients?</h2>
            <p>Yes, call us to book a first visit.</p>
            <p hidden>secret</p>
          </main>
          <footer>© Acme</footer>
        </body></html>"#;

    #[test]
    fn keeps_the_content_and_drops_the_chrome() {
        let page = extract(PAGE);
        assert_eq!(page.title.as_deref(), Some("Acme Dental"));
        let headings: Vec<_> = page.sections.iter().map(|s| s.heading.as_deref()).collect();
        assert_eq!(headings, [Some("Welcome"), Some("Opening hours"), Some("Do you take new patients?")]);
        assert_eq!(page.sections[0].text, "We are a family practice in Springfield.");
        assert_eq!(page.sections[1].text, "Monday to Friday: 8 am to 6 pm\nSaturday: 9 am to noon");
        let all: String = page.sections.iter().map(|s| s.text.clone()).collect();
        for junk in ["tracking", "cookies", "Subscribe", "Home", "©", "secret", "color", "Site header"] {
            assert!(!all.contains(junk), "{junk} leaked");
        }
    }

    #[test]
    fn pages_without_main_use_the_body_and_text_before_headings() {
        let page = extract("<html><body><p>Intro text.</p><h3>Details</h3><p>More.</p></body></html>");
        assert_eq!(page.sections[0], Section { heading: None, text: "Intro text.".into() });
        assert_eq!(page.sections[1], Section { heading: Some("Details".into()), text: "More.".into() });
    }

    #[test]
    fn inline_elements_do_not_glue_words() {
        let page = extract("<body><p>Call <a href='tel:1'>555-1234</a> or <em>email</em> us.</p></body>");
        assert_eq!(page.sections[0].text, "Call 555-1234 or email us.");
    }
}

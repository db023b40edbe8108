//! A light, purpose-built scanner for the POSIX sh / bash syntax found in monitor
//! commands.
//!
//! It is not a shell: it only recovers the structure the lints need — lists, `&&`/`||`
//! chains, pipelines, simple commands with their words (quotes removed, quoting
//! remembered), redirections, compound commands (`if`, `while`, `until`, `for`, `case`,
//! `{ }`, `( )`, functions) and command / process substitutions, each with its byte
//! range in the command string. Crates such as `shlex` or `shell-words` only split words
//! and lose the operators, which is the part that matters here.
//!
//! The scanner never fails: input that is not valid shell is scanned as far as it goes,
//! stray tokens are skipped, unterminated quotes run to the end of the input.

use std::ops::Range;

/// Deepest nesting of substitutions and compound commands that is scanned; deeper
/// input is skipped as text (a guard against stack exhaustion, never reached by real
/// monitor commands).
const MAX_DEPTH: usize = 48;

/// A list of commands separated by `;`, `&` or newlines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Script {
    /// The items, in source order.
    pub items: Vec<Item>,
}

/// One item of a [`Script`]: an and-or list, possibly run in the background.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The `a && b || c` chain.
    pub and_or: AndOr,
    /// The byte range of the `&` that sends the item to the background, if any.
    pub background: Option<Range<usize>>,
}

/// Pipelines joined by `&&` and `||`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AndOr {
    /// The pipelines, in source order (at least one, unless the input was empty).
    pub pipelines: Vec<Pipeline>,
    /// `connectors[i]` joins `pipelines[i]` and `pipelines[i + 1]`.
    pub connectors: Vec<Connector>,
}

/// The operator joining two pipelines of an [`AndOr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connector {
    /// `&&`
    And,
    /// `||`
    Or,
}

/// Commands joined by `|` (or `|&`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pipeline {
    /// Whether the pipeline is preceded by `!`.
    pub negated: bool,
    /// The stages, in order: each stage's stdout feeds the next stage's stdin.
    pub stages: Vec<Command>,
}

/// One stage of a pipeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// A command name with arguments, assignments and redirections.
    Simple(SimpleCommand),
    /// A compound command (`if`, loops, groups, subshells, functions, `case`).
    Compound(CompoundCommand),
}

impl Command {
    /// The byte range of the whole command.
    pub fn span(&self) -> Range<usize> {
        match self {
            Command::Simple(c) => c.span.clone(),
            Command::Compound(c) => c.span.clone(),
        }
    }

    /// The command's redirections.
    pub fn redirects(&self) -> &[Redirect] {
        match self {
            Command::Simple(c) => &c.redirects,
            Command::Compound(c) => &c.redirects,
        }
    }
}

/// A simple command: `NAME=value... word... redirection...`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SimpleCommand {
    /// Leading `NAME=value` assignments.
    pub assignments: Vec<Word>,
    /// The command name and its arguments.
    pub words: Vec<Word>,
    /// Redirections, wherever they appeared in the command.
    pub redirects: Vec<Redirect>,
    /// The byte range of the whole command.
    pub span: Range<usize>,
}

/// A compound command.
#[derive(Debug, Clone, PartialEq)]
pub struct CompoundCommand {
    /// Which construct it is.
    pub kind: CompoundKind,
    /// Conditions: the `if`/`elif` lists, or the `while`/`until` list.
    pub conditions: Vec<Script>,
    /// Bodies: `then`/`else` lists, the loop body, the group body, the `case` arms.
    pub bodies: Vec<Script>,
    /// Redirections applied to the whole construct (`done > file`).
    pub redirects: Vec<Redirect>,
    /// The byte range of the whole construct.
    pub span: Range<usize>,
}

/// The kind of a [`CompoundCommand`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompoundKind {
    /// `{ list; }`
    Group,
    /// `( list )`
    Subshell,
    /// `if list; then list; [elif ...;] [else list;] fi`
    If,
    /// `while list; do list; done`
    While,
    /// `until list; do list; done`
    Until,
    /// `for name [in words]; do list; done` (also `select`)
    For,
    /// `case word in pattern) list;; ... esac`
    Case,
    /// `name() compound` or `function name compound`: the body runs only when called.
    FunctionDef,
}

impl CompoundKind {
    /// Whether the construct repeats its body (`while`, `until`, `for`).
    pub fn is_loop(self) -> bool {
        matches!(
            self,
            CompoundKind::While | CompoundKind::Until | CompoundKind::For
        )
    }
}

/// A redirection such as `> out`, `2>&1`, `< in` or `<<EOF`.
#[derive(Debug, Clone, PartialEq)]
pub struct Redirect {
    /// The explicit file descriptor (`2` in `2>&1`), if any.
    pub fd: Option<u32>,
    /// The operator.
    pub op: RedirectOp,
    /// The target word (file, descriptor or here-document delimiter), if present.
    pub target: Option<Word>,
    /// The byte range of the operator and its target.
    pub span: Range<usize>,
}

impl Redirect {
    /// Whether this redirection sends the command's standard output somewhere else
    /// than the pipe or terminal it inherited (a file, `/dev/null`, stderr, ...).
    pub fn redirects_stdout(&self) -> bool {
        match self.op {
            RedirectOp::OutErr | RedirectOp::AppendOutErr => true,
            RedirectOp::Out | RedirectOp::Append | RedirectOp::Clobber => {
                matches!(self.fd, None | Some(1))
            }
            RedirectOp::DupOut => {
                matches!(self.fd, None | Some(1))
                    && self.target.as_ref().is_some_and(|t| t.text != "1")
            }
            _ => false,
        }
    }

    /// Whether this redirection replaces the command's standard input.
    pub fn redirects_stdin(&self) -> bool {
        match self.op {
            RedirectOp::In
            | RedirectOp::HereDoc
            | RedirectOp::HereDocStrip
            | RedirectOp::HereString
            | RedirectOp::ReadWrite
            | RedirectOp::DupIn => matches!(self.fd, None | Some(0)),
            _ => false,
        }
    }
}

/// A redirection operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectOp {
    /// `<`
    In,
    /// `>`
    Out,
    /// `>>`
    Append,
    /// `>|`
    Clobber,
    /// `<<`
    HereDoc,
    /// `<<-`
    HereDocStrip,
    /// `<<<`
    HereString,
    /// `<&`
    DupIn,
    /// `>&`
    DupOut,
    /// `<>`
    ReadWrite,
    /// `&>`
    OutErr,
    /// `&>>`
    AppendOutErr,
}

/// A shell word.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Word {
    /// The byte range of the word in the command string.
    pub span: Range<usize>,
    /// The word with quotes and backslashes removed; expansions and substitutions are
    /// kept as written (`$HOME`, `${X}`, `$(cmd)`).
    pub text: String,
    /// Whether any part of the word was quoted or backslash-escaped.
    pub quoted: bool,
    /// Parameter expansions (`$NAME`, `${NAME...}`) in the word.
    pub expansions: Vec<Expansion>,
    /// Command and process substitutions in the word.
    pub substitutions: Vec<Substitution>,
}

impl Word {
    /// The word as written in `src` (the string that was parsed).
    pub fn raw<'a>(&self, src: &'a str) -> &'a str {
        src.get(self.span.clone()).unwrap_or("")
    }

    /// Whether the word is the unquoted reserved word or operator-like word `kw`.
    pub fn is_keyword(&self, kw: &str) -> bool {
        !self.quoted && self.text == kw
    }
}

/// A parameter expansion inside a word.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// The parameter name (`HOME` for `$HOME` and `${HOME:-x}`).
    pub name: String,
    /// The byte range of the expansion (`$HOME` or `${HOME:-x}`).
    pub span: Range<usize>,
    /// Whether the expansion is inside double quotes.
    pub quoted: bool,
    /// Whether it was written with braces (`${NAME}`).
    pub braced: bool,
}

/// A command or process substitution inside a word.
#[derive(Debug, Clone, PartialEq)]
pub struct Substitution {
    /// Which kind.
    pub kind: SubstitutionKind,
    /// The commands inside.
    pub script: Script,
    /// The byte range of the whole substitution, delimiters included.
    pub span: Range<usize>,
}

/// The kind of a [`Substitution`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubstitutionKind {
    /// `$(...)`: the output is captured by the shell.
    Command,
    /// `` `...` ``: the output is captured by the shell.
    Backtick,
    /// `<(...)`: the output is read through a pipe by the enclosing command.
    ProcessInput,
    /// `>(...)`: the input comes through a pipe from the enclosing command.
    ProcessOutput,
}

/// Scans `src` as a shell script.
pub fn parse(src: &str) -> Script {
    let mut parser = Parser::new(src);
    let mut script = Script::default();
    loop {
        let part = parser.parse_script();
        script.items.extend(part.items);
        if matches!(parser.peek(), Token::Eof) {
            break;
        }
        // A stray `)`, `fi`, `done`, `;;`...: skip it and go on.
        parser.next();
    }
    script
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(Word),
    Op(Op, Range<usize>),
    Newline,
    Eof,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Pipe,
    AndIf,
    OrIf,
    Semi,
    CaseEnd,
    Amp,
    LParen,
    RParen,
    Redir(RedirectOp, Option<u32>),
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    end: usize,
    peeked: Option<Token>,
    /// Number of tokens handed out by `next`, to detect lack of progress.
    consumed: usize,
    heredocs: Vec<(String, bool)>,
    depth: usize,
}

const TERMINATORS: &[&str] = &["then", "elif", "else", "fi", "do", "done", "esac", "}"];

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            end: src.len(),
            peeked: None,
            consumed: 0,
            heredocs: Vec::new(),
            depth: 0,
        }
    }

    /// `src[range]`, or "" when the range is not on character boundaries.
    fn slice_str(&self, range: Range<usize>) -> &'a str {
        self.src.get(range).unwrap_or("")
    }

    fn at(&self, i: usize) -> Option<u8> {
        if i < self.end {
            self.bytes.get(i).copied()
        } else {
            None
        }
    }

    fn peek(&mut self) -> &Token {
        if self.peeked.is_none() {
            let t = self.lex();
            self.peeked = Some(t);
        }
        self.peeked.as_ref().unwrap_or(&Token::Eof)
    }

    fn next(&mut self) -> Token {
        self.peek();
        self.consumed += 1;
        self.peeked.take().unwrap_or(Token::Eof)
    }

    /// The start of the next token (skipping blanks), for spans.
    fn peek_start(&mut self) -> usize {
        match self.peek().clone() {
            Token::Word(w) => w.span.start,
            Token::Op(_, r) => r.start,
            _ => self.pos,
        }
    }

    fn peek_keyword(&mut self, kw: &str) -> bool {
        matches!(self.peek(), Token::Word(w) if w.is_keyword(kw))
    }

    fn eat_keyword(&mut self, kw: &str) -> Option<Range<usize>> {
        if let Token::Word(w) = self.peek() {
            if w.is_keyword(kw) {
                let span = w.span.clone();
                self.next();
                return Some(span);
            }
        }
        None
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Token::Newline) {
            self.next();
        }
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek(), Token::Newline | Token::Op(Op::Semi, _)) {
            self.next();
        }
    }

    fn at_terminator(&mut self) -> bool {
        match self.peek() {
            Token::Eof | Token::Op(Op::RParen, _) | Token::Op(Op::CaseEnd, _) => true,
            Token::Word(w) => !w.quoted && TERMINATORS.contains(&w.text.as_str()),
            _ => false,
        }
    }

    // ---------------------------------------------------------------- grammar

    fn parse_script(&mut self) -> Script {
        let mut script = Script::default();
        loop {
            self.skip_separators();
            if self.at_terminator() {
                break;
            }
            let before = self.consumed;
            let and_or = self.parse_and_or();
            let mut item = Item {
                and_or,
                background: None,
            };
            match self.peek().clone() {
                Token::Op(Op::Amp, r) => {
                    item.background = Some(r);
                    self.next();
                }
                Token::Op(Op::Semi, _) | Token::Newline => {
                    self.next();
                }
                _ => {}
            }
            if self.consumed == before {
                // No progress (an operator that cannot start a command): skip it.
                self.next();
                continue;
            }
            if !item.and_or.pipelines.is_empty() {
                script.items.push(item);
            }
        }
        script
    }

    fn parse_and_or(&mut self) -> AndOr {
        let mut and_or = AndOr::default();
        if let Some(p) = self.parse_pipeline() {
            and_or.pipelines.push(p);
        }
        loop {
            let connector = match self.peek() {
                Token::Op(Op::AndIf, _) => Connector::And,
                Token::Op(Op::OrIf, _) => Connector::Or,
                _ => break,
            };
            self.next();
            self.skip_newlines();
            match self.parse_pipeline() {
                Some(p) => {
                    and_or.connectors.push(connector);
                    and_or.pipelines.push(p);
                }
                None => break,
            }
        }
        and_or
    }

    fn parse_pipeline(&mut self) -> Option<Pipeline> {
        let mut pipeline = Pipeline::default();
        loop {
            if self.eat_keyword("!").is_some() {
                pipeline.negated = !pipeline.negated;
            } else if self.eat_keyword("time").is_some() {
                while self.eat_keyword("-p").is_some() {}
            } else {
                break;
            }
        }
        pipeline.stages.push(self.parse_command()?);
        while matches!(self.peek(), Token::Op(Op::Pipe, _)) {
            self.next();
            self.skip_newlines();
            match self.parse_command() {
                Some(c) => pipeline.stages.push(c),
                None => break,
            }
        }
        Some(pipeline)
    }

    fn parse_command(&mut self) -> Option<Command> {
        if self.depth >= MAX_DEPTH {
            return self.parse_simple();
        }
        match self.peek().clone() {
            Token::Word(w) if !w.quoted => match w.text.as_str() {
                "{" => Some(self.nested(|p| p.parse_group())),
                "if" => Some(self.nested(|p| p.parse_if())),
                "while" => Some(self.nested(|p| p.parse_loop(CompoundKind::While))),
                "until" => Some(self.nested(|p| p.parse_loop(CompoundKind::Until))),
                "for" | "select" => Some(self.nested(|p| p.parse_for())),
                "case" => Some(self.nested(|p| p.parse_case())),
                "function" => Some(self.nested(|p| p.parse_function_keyword())),
                "[[" => Some(self.parse_test_command()),
                _ => self.parse_simple(),
            },
            Token::Op(Op::LParen, r) => {
                if self.at(r.end) == Some(b'(') {
                    Some(self.parse_arithmetic_command(r.start))
                } else {
                    Some(self.nested(|p| p.parse_subshell()))
                }
            }
            Token::Word(_) | Token::Op(Op::Redir(..), _) => self.parse_simple(),
            _ => None,
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Command) -> Command {
        self.depth += 1;
        let c = f(self);
        self.depth -= 1;
        c
    }

    fn finish_compound(
        &mut self,
        kind: CompoundKind,
        start: usize,
        conditions: Vec<Script>,
        bodies: Vec<Script>,
    ) -> Command {
        let mut redirects = Vec::new();
        let mut end = self.pos;
        while let Token::Op(Op::Redir(op, fd), r) = self.peek().clone() {
            self.next();
            let r = self.finish_redirect(op, fd, r);
            end = r.span.end;
            redirects.push(r);
        }
        if redirects.is_empty() {
            end = self.last_end(start);
        }
        Command::Compound(CompoundCommand {
            kind,
            conditions,
            bodies,
            redirects,
            span: start..end,
        })
    }

    /// The end of the last consumed token: the current position, minus any blanks
    /// lexed past (peeked tokens are never consumed here).
    fn last_end(&self, start: usize) -> usize {
        let mut end = match &self.peeked {
            Some(Token::Word(w)) => w.span.start,
            Some(Token::Op(_, r)) => r.start,
            _ => self.pos,
        };
        while end > start
            && matches!(
                self.bytes.get(end - 1),
                Some(b' ' | b'\t' | b'\n' | b'\r' | b';')
            )
        {
            end -= 1;
        }
        end.max(start)
    }

    fn parse_group(&mut self) -> Command {
        let start = self.peek_start();
        self.next();
        let body = self.parse_script();
        self.eat_keyword("}");
        self.finish_compound(CompoundKind::Group, start, Vec::new(), vec![body])
    }

    fn parse_subshell(&mut self) -> Command {
        let start = self.peek_start();
        self.next();
        let body = self.parse_script();
        if matches!(self.peek(), Token::Op(Op::RParen, _)) {
            self.next();
        }
        self.finish_compound(CompoundKind::Subshell, start, Vec::new(), vec![body])
    }

    fn parse_if(&mut self) -> Command {
        let start = self.peek_start();
        self.next();
        let mut conditions = vec![self.parse_script()];
        self.eat_keyword("then");
        let mut bodies = vec![self.parse_script()];
        loop {
            if self.eat_keyword("elif").is_some() {
                conditions.push(self.parse_script());
                self.eat_keyword("then");
                bodies.push(self.parse_script());
            } else if self.eat_keyword("else").is_some() {
                bodies.push(self.parse_script());
            } else {
                self.eat_keyword("fi");
                break;
            }
        }
        self.finish_compound(CompoundKind::If, start, conditions, bodies)
    }

    fn parse_loop(&mut self, kind: CompoundKind) -> Command {
        let start = self.peek_start();
        self.next();
        let condition = self.parse_script();
        self.eat_keyword("do");
        let body = self.parse_script();
        self.eat_keyword("done");
        self.finish_compound(kind, start, vec![condition], vec![body])
    }

    fn parse_for(&mut self) -> Command {
        let start = self.peek_start();
        self.next();
        // `for ((i = 0; i < 3; i++))`
        let mut i = self.pos;
        while matches!(self.at(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        if self.peeked.is_none() && self.at(i) == Some(b'(') && self.at(i + 1) == Some(b'(') {
            self.pos = i + 1;
            self.skip_balanced_parens(1);
        } else if matches!(self.peek(), Token::Word(_)) {
            self.next(); // the variable name
            self.skip_newlines();
            if self.eat_keyword("in").is_some() {
                while matches!(self.peek(), Token::Word(_)) {
                    self.next();
                }
            }
        }
        self.skip_separators();
        let body = if self.peek_keyword("{") {
            match self.parse_group() {
                Command::Compound(c) => c.bodies.into_iter().next().unwrap_or_default(),
                Command::Simple(_) => Script::default(),
            }
        } else {
            self.eat_keyword("do");
            let body = self.parse_script();
            self.eat_keyword("done");
            body
        };
        self.finish_compound(CompoundKind::For, start, Vec::new(), vec![body])
    }

    fn parse_case(&mut self) -> Command {
        let start = self.peek_start();
        self.next();
        if matches!(self.peek(), Token::Word(_)) {
            self.next(); // the subject
        }
        self.skip_newlines();
        self.eat_keyword("in");
        let mut bodies = Vec::new();
        loop {
            self.skip_newlines();
            if self.eat_keyword("esac").is_some() || matches!(self.peek(), Token::Eof) {
                break;
            }
            let before = self.consumed;
            if matches!(self.peek(), Token::Op(Op::LParen, _)) {
                self.next();
            }
            // patterns: word (| word)* )
            loop {
                match self.peek() {
                    Token::Word(_) | Token::Op(Op::Pipe, _) => {
                        self.next();
                    }
                    Token::Op(Op::RParen, _) => {
                        self.next();
                        break;
                    }
                    _ => break,
                }
            }
            bodies.push(self.parse_script());
            if matches!(self.peek(), Token::Op(Op::CaseEnd, _)) {
                self.next();
            }
            if self.consumed == before {
                break;
            }
        }
        self.finish_compound(CompoundKind::Case, start, Vec::new(), bodies)
    }

    fn parse_function_keyword(&mut self) -> Command {
        let start = self.peek_start();
        self.next(); // `function`
        if matches!(self.peek(), Token::Word(_)) {
            self.next(); // the name
        }
        if matches!(self.peek(), Token::Op(Op::LParen, _)) {
            self.next();
            if matches!(self.peek(), Token::Op(Op::RParen, _)) {
                self.next();
            }
        }
        self.function_body(start)
    }

    fn function_body(&mut self, start: usize) -> Command {
        self.skip_newlines();
        let body = match self.parse_command() {
            Some(Command::Compound(c)) if c.kind != CompoundKind::FunctionDef => {
                let mut script = Script::default();
                script.items.push(Item {
                    and_or: AndOr {
                        pipelines: vec![Pipeline {
                            negated: false,
                            stages: vec![Command::Compound(c)],
                        }],
                        connectors: Vec::new(),
                    },
                    background: None,
                });
                script
            }
            Some(other) => Script {
                items: vec![Item {
                    and_or: AndOr {
                        pipelines: vec![Pipeline {
                            negated: false,
                            stages: vec![other],
                        }],
                        connectors: Vec::new(),
                    },
                    background: None,
                }],
            },
            None => Script::default(),
        };
        let end = self.last_end(start);
        Command::Compound(CompoundCommand {
            kind: CompoundKind::FunctionDef,
            conditions: Vec::new(),
            bodies: vec![body],
            redirects: Vec::new(),
            span: start..end,
        })
    }

    /// `[[ ... ]]`: operators inside are words, not pipes or redirections.
    fn parse_test_command(&mut self) -> Command {
        let start = self.peek_start();
        let mut cmd = SimpleCommand::default();
        loop {
            match self.peek().clone() {
                Token::Word(w) => {
                    self.next();
                    let done = w.is_keyword("]]");
                    cmd.words.push(w);
                    if done {
                        break;
                    }
                }
                Token::Op(op, r) if op != Op::Semi && op != Op::Amp && op != Op::CaseEnd => {
                    self.next();
                    let text = self.src.get(r.clone()).unwrap_or("").to_string();
                    cmd.words.push(Word {
                        span: r,
                        text,
                        ..Word::default()
                    });
                }
                _ => break,
            }
        }
        cmd.span = start..self.last_end(start);
        Command::Simple(cmd)
    }

    /// `(( expr ))`, scanned as one opaque word.
    fn parse_arithmetic_command(&mut self, start: usize) -> Command {
        self.next(); // the first `(`; `self.pos` is on the second one
        self.skip_balanced_parens(1);
        let span = start..self.pos;
        let text = self.src.get(span.clone()).unwrap_or("").to_string();
        Command::Simple(SimpleCommand {
            assignments: Vec::new(),
            words: vec![Word {
                span: span.clone(),
                text,
                ..Word::default()
            }],
            redirects: Vec::new(),
            span,
        })
    }

    /// Skips to the `)` closing `depth` open parentheses (quotes respected).
    fn skip_balanced_parens(&mut self, mut depth: usize) {
        while let Some(c) = self.at(self.pos) {
            self.pos += 1;
            match c {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return;
                    }
                }
                b'\\' => self.pos += 1,
                b'\'' | b'"' => {
                    while let Some(d) = self.at(self.pos) {
                        self.pos += 1;
                        if d == b'\\' && c == b'"' {
                            self.pos += 1;
                        } else if d == c {
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        self.pos = self.pos.min(self.end);
    }

    fn parse_simple(&mut self) -> Option<Command> {
        let start = self.peek_start();
        let mut cmd = SimpleCommand::default();
        loop {
            match self.peek().clone() {
                Token::Word(w) => {
                    self.next();
                    if cmd.words.is_empty() && is_assignment(&w, self.src) {
                        cmd.assignments.push(w);
                        continue;
                    }
                    cmd.words.push(w);
                    // `name() { ...; }`
                    if cmd.words.len() == 1 && cmd.assignments.is_empty() {
                        if let Token::Op(Op::LParen, r) = self.peek().clone() {
                            let mut i = r.end;
                            while matches!(self.at(i), Some(b' ' | b'\t')) {
                                i += 1;
                            }
                            if self.at(i) == Some(b')') {
                                self.next();
                                if matches!(self.peek(), Token::Op(Op::RParen, _)) {
                                    self.next();
                                }
                                return Some(self.nested(|p| p.function_body(start)));
                            }
                        }
                    }
                }
                Token::Op(Op::Redir(op, fd), r) => {
                    self.next();
                    let redirect = self.finish_redirect(op, fd, r);
                    cmd.redirects.push(redirect);
                }
                _ => break,
            }
        }
        if cmd.words.is_empty() && cmd.assignments.is_empty() && cmd.redirects.is_empty() {
            return None;
        }
        cmd.span = start..self.last_end(start);
        Some(Command::Simple(cmd))
    }

    fn finish_redirect(&mut self, op: RedirectOp, fd: Option<u32>, r: Range<usize>) -> Redirect {
        let mut span = r;
        let target = match self.peek().clone() {
            Token::Word(w) => {
                self.next();
                span.end = w.span.end;
                Some(w)
            }
            _ => None,
        };
        if matches!(op, RedirectOp::HereDoc | RedirectOp::HereDocStrip) {
            if let Some(t) = &target {
                self.heredocs
                    .push((t.text.clone(), op == RedirectOp::HereDocStrip));
            }
        }
        Redirect {
            fd,
            op,
            target,
            span,
        }
    }

    // ---------------------------------------------------------------- lexer

    fn lex(&mut self) -> Token {
        loop {
            match self.at(self.pos) {
                None => return Token::Eof,
                Some(b' ' | b'\t' | b'\r') => self.pos += 1,
                Some(b'\\') if self.at(self.pos + 1) == Some(b'\n') => self.pos += 2,
                Some(b'#') => {
                    while !matches!(self.at(self.pos), None | Some(b'\n')) {
                        self.pos += 1;
                    }
                }
                Some(_) => break,
            }
        }
        let start = self.pos;
        let c = self.at(start).unwrap_or(b'\n');
        let n1 = self.at(start + 1);
        let n2 = self.at(start + 2);
        let (op, len) = match c {
            b'\n' => {
                self.pos += 1;
                self.read_heredoc_bodies();
                return Token::Newline;
            }
            b'|' => match n1 {
                Some(b'|') => (Op::OrIf, 2),
                Some(b'&') => (Op::Pipe, 2),
                _ => (Op::Pipe, 1),
            },
            b'&' => match (n1, n2) {
                (Some(b'&'), _) => (Op::AndIf, 2),
                (Some(b'>'), Some(b'>')) => (Op::Redir(RedirectOp::AppendOutErr, None), 3),
                (Some(b'>'), _) => (Op::Redir(RedirectOp::OutErr, None), 2),
                _ => (Op::Amp, 1),
            },
            b';' => match (n1, n2) {
                (Some(b';'), Some(b'&')) => (Op::CaseEnd, 3),
                (Some(b';'), _) | (Some(b'&'), _) => (Op::CaseEnd, 2),
                _ => (Op::Semi, 1),
            },
            b'(' => (Op::LParen, 1),
            b')' => (Op::RParen, 1),
            b'<' | b'>' if n1 == Some(b'(') => return Token::Word(self.lex_word()),
            b'<' | b'>' => match self.redirect_op(start, None) {
                Some((op, len)) => (op, len),
                None => (Op::Redir(RedirectOp::In, None), 1),
            },
            _ => {
                let word = self.lex_word();
                // An IO number: `2>`, `1>&2`.
                if !word.quoted
                    && !word.text.is_empty()
                    && word.text.bytes().all(|b| b.is_ascii_digit())
                    && word.span.end == self.pos
                    && matches!(self.at(self.pos), Some(b'<' | b'>'))
                    && self.at(self.pos + 1) != Some(b'(')
                {
                    let fd = word.text.parse::<u32>().ok();
                    if let Some((op, len)) = self.redirect_op(self.pos, fd) {
                        let r = word.span.start..self.pos + len;
                        self.pos += len;
                        return Token::Op(op, r);
                    }
                }
                return Token::Word(word);
            }
        };
        self.pos += len;
        Token::Op(op, start..start + len)
    }

    fn redirect_op(&self, at: usize, fd: Option<u32>) -> Option<(Op, usize)> {
        let c = self.at(at)?;
        let n1 = self.at(at + 1);
        let n2 = self.at(at + 2);
        let (op, len) = match (c, n1, n2) {
            (b'<', Some(b'<'), Some(b'<')) => (RedirectOp::HereString, 3),
            (b'<', Some(b'<'), Some(b'-')) => (RedirectOp::HereDocStrip, 3),
            (b'<', Some(b'<'), _) => (RedirectOp::HereDoc, 2),
            (b'<', Some(b'&'), _) => (RedirectOp::DupIn, 2),
            (b'<', Some(b'>'), _) => (RedirectOp::ReadWrite, 2),
            (b'<', _, _) => (RedirectOp::In, 1),
            (b'>', Some(b'>'), _) => (RedirectOp::Append, 2),
            (b'>', Some(b'&'), _) => (RedirectOp::DupOut, 2),
            (b'>', Some(b'|'), _) => (RedirectOp::Clobber, 2),
            (b'>', _, _) => (RedirectOp::Out, 1),
            _ => return None,
        };
        Some((Op::Redir(op, fd), len))
    }

    fn read_heredoc_bodies(&mut self) {
        let pending = std::mem::take(&mut self.heredocs);
        for (delimiter, strip_tabs) in pending {
            while self.pos < self.end {
                let line_end = self
                    .slice_str(self.pos..self.end)
                    .find('\n')
                    .map_or(self.end, |i| self.pos + i);
                let line = self.slice_str(self.pos..line_end);
                self.pos = (line_end + 1).min(self.end);
                let line = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if line == delimiter {
                    break;
                }
            }
        }
    }

    fn push_char(&mut self, text: &mut String) {
        match self
            .src
            .get(self.pos..self.end)
            .and_then(|s| s.chars().next())
        {
            Some(ch) => {
                text.push(ch);
                self.pos += ch.len_utf8();
            }
            None => self.pos = self.end,
        }
    }

    fn lex_word(&mut self) -> Word {
        let start = self.pos;
        let mut w = Word {
            span: start..start,
            ..Word::default()
        };
        while let Some(c) = self.at(self.pos) {
            match c {
                b'<' | b'>' if self.pos == start && self.at(self.pos + 1) == Some(b'(') => {
                    let kind = if c == b'<' {
                        SubstitutionKind::ProcessInput
                    } else {
                        SubstitutionKind::ProcessOutput
                    };
                    self.pos += 2;
                    let script = self.parse_until_rparen();
                    w.substitutions.push(Substitution {
                        kind,
                        script,
                        span: start..self.pos,
                    });
                    w.text.push_str(self.slice_str(start..self.pos));
                }
                b' ' | b'\t' | b'\r' | b'\n' | b'|' | b'&' | b';' | b'(' | b')' | b'<' | b'>' => {
                    break
                }
                b'\\' => {
                    self.pos += 1;
                    match self.at(self.pos) {
                        Some(b'\n') => self.pos += 1,
                        Some(_) => {
                            w.quoted = true;
                            let mut t = std::mem::take(&mut w.text);
                            self.push_char(&mut t);
                            w.text = t;
                        }
                        None => w.text.push('\\'),
                    }
                }
                b'\'' => {
                    w.quoted = true;
                    self.pos += 1;
                    let s = self.pos;
                    while !matches!(self.at(self.pos), None | Some(b'\'')) {
                        self.pos += 1;
                    }
                    w.text.push_str(self.slice_str(s..self.pos));
                    if self.pos < self.end {
                        self.pos += 1;
                    }
                }
                b'"' => self.lex_double_quoted(&mut w),
                b'$' => self.lex_dollar(&mut w, false),
                b'`' => self.lex_backtick(&mut w),
                _ => {
                    let mut t = std::mem::take(&mut w.text);
                    self.push_char(&mut t);
                    w.text = t;
                }
            }
        }
        w.span = start..self.pos;
        w
    }

    fn lex_double_quoted(&mut self, w: &mut Word) {
        w.quoted = true;
        self.pos += 1;
        while let Some(c) = self.at(self.pos) {
            match c {
                b'"' => {
                    self.pos += 1;
                    return;
                }
                b'\\' => match self.at(self.pos + 1) {
                    Some(b'\n') => self.pos += 2,
                    Some(d @ (b'$' | b'`' | b'"' | b'\\')) => {
                        w.text.push(d as char);
                        self.pos += 2;
                    }
                    _ => {
                        w.text.push('\\');
                        self.pos += 1;
                    }
                },
                b'$' => self.lex_dollar(w, true),
                b'`' => self.lex_backtick(w),
                _ => {
                    let mut t = std::mem::take(&mut w.text);
                    self.push_char(&mut t);
                    w.text = t;
                }
            }
        }
    }

    fn lex_dollar(&mut self, w: &mut Word, in_double_quotes: bool) {
        let s = self.pos;
        match self.at(s + 1) {
            Some(b'(') if self.at(s + 2) == Some(b'(') => {
                self.pos = s + 2;
                self.skip_balanced_parens(1);
                w.text.push_str(self.slice_str(s..self.pos));
            }
            Some(b'(') => {
                self.pos = s + 2;
                let script = self.parse_until_rparen();
                w.substitutions.push(Substitution {
                    kind: SubstitutionKind::Command,
                    script,
                    span: s..self.pos,
                });
                w.text.push_str(self.slice_str(s..self.pos));
            }
            Some(b'{') => {
                let name_start = s + 2;
                let mut i = name_start;
                while matches!(self.at(i), Some(b) if b.is_ascii_alphanumeric() || b == b'_') {
                    i += 1;
                }
                if i == name_start && matches!(self.at(i), Some(b'#' | b'!')) {
                    // `${#x}`, `${!x}`: the name follows.
                    i += 1;
                    let j = i;
                    while matches!(self.at(i), Some(b) if b.is_ascii_alphanumeric() || b == b'_') {
                        i += 1;
                    }
                    if i == j {
                        i = j;
                    }
                }
                let name = self
                    .slice_str(name_start..i)
                    .trim_start_matches(['#', '!'])
                    .to_string();
                // Find the matching `}`.
                let mut depth = 1usize;
                self.pos = s + 2;
                while let Some(c) = self.at(self.pos) {
                    self.pos += 1;
                    match c {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        b'\\' => self.pos = (self.pos + 1).min(self.end),
                        b'\'' if !in_double_quotes => {
                            while !matches!(self.at(self.pos), None | Some(b'\'')) {
                                self.pos += 1;
                            }
                            self.pos = (self.pos + 1).min(self.end);
                        }
                        _ => {}
                    }
                }
                w.text.push_str(self.slice_str(s..self.pos));
                w.expansions.push(Expansion {
                    name,
                    span: s..self.pos,
                    quoted: in_double_quotes,
                    braced: true,
                });
            }
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => {
                let mut i = s + 1;
                while matches!(self.at(i), Some(b) if b.is_ascii_alphanumeric() || b == b'_') {
                    i += 1;
                }
                self.pos = i;
                w.text.push_str(self.slice_str(s..i));
                w.expansions.push(Expansion {
                    name: self.slice_str(s + 1..i).to_string(),
                    span: s..i,
                    quoted: in_double_quotes,
                    braced: false,
                });
            }
            Some(b) if b.is_ascii_digit() || b"?@*#$!-".contains(&b) => {
                self.pos = s + 2;
                w.text.push_str(self.slice_str(s..s + 2));
                w.expansions.push(Expansion {
                    name: (b as char).to_string(),
                    span: s..s + 2,
                    quoted: in_double_quotes,
                    braced: false,
                });
            }
            Some(b'\'') if !in_double_quotes => {
                // $'ANSI-C'
                w.quoted = true;
                self.pos = s + 2;
                let begin = self.pos;
                while let Some(c) = self.at(self.pos) {
                    if c == b'\\' {
                        self.pos += 2;
                    } else if c == b'\'' {
                        break;
                    } else {
                        self.pos += 1;
                    }
                }
                self.pos = self.pos.min(self.end);
                w.text.push_str(self.slice_str(begin..self.pos));
                if self.pos < self.end {
                    self.pos += 1;
                }
            }
            Some(b'"') if !in_double_quotes => {
                // $"locale string"
                self.pos = s + 1;
                self.lex_double_quoted(w);
            }
            _ => {
                w.text.push('$');
                self.pos = s + 1;
            }
        }
    }

    fn lex_backtick(&mut self, w: &mut Word) {
        let s = self.pos;
        let mut close = s + 1;
        while let Some(c) = self.at(close) {
            if c == b'\\' {
                close += 2;
            } else if c == b'`' {
                break;
            } else {
                close += 1;
            }
        }
        let close = close.min(self.end);
        let script = if self.depth < MAX_DEPTH {
            let saved_end = self.end;
            let saved_heredocs = std::mem::take(&mut self.heredocs);
            self.end = close;
            self.pos = s + 1;
            self.depth += 1;
            let script = self.parse_to_end();
            self.depth -= 1;
            self.end = saved_end;
            self.heredocs = saved_heredocs;
            script
        } else {
            Script::default()
        };
        self.peeked = None;
        self.pos = if close < self.end { close + 1 } else { close };
        w.text.push_str(self.slice_str(s..self.pos));
        w.substitutions.push(Substitution {
            kind: SubstitutionKind::Backtick,
            script,
            span: s..self.pos,
        });
    }

    /// Parses everything up to `self.end`, skipping stray terminators.
    fn parse_to_end(&mut self) -> Script {
        let mut script = Script::default();
        loop {
            let part = self.parse_script();
            script.items.extend(part.items);
            if matches!(self.peek(), Token::Eof) {
                break;
            }
            self.next();
        }
        self.peeked = None;
        script
    }

    /// Parses the inside of `$(...)`, `<(...)` or `>(...)` (the opening delimiter is
    /// already consumed) and consumes the closing `)`.
    fn parse_until_rparen(&mut self) -> Script {
        if self.depth >= MAX_DEPTH {
            self.skip_balanced_parens(1);
            return Script::default();
        }
        debug_assert!(self.peeked.is_none());
        self.depth += 1;
        let mut script = Script::default();
        loop {
            let part = self.parse_script();
            script.items.extend(part.items);
            match self.peek() {
                Token::Eof => {
                    self.peeked = None;
                    break;
                }
                Token::Op(Op::RParen, _) => {
                    self.next();
                    break;
                }
                _ => {
                    self.next();
                }
            }
        }
        self.depth -= 1;
        script
    }
}

fn is_assignment(w: &Word, src: &str) -> bool {
    let raw = w.raw(src);
    let Some(eq) = raw.find('=') else {
        return false;
    };
    let name = raw[..eq].trim_end_matches('+');
    let name = match name.find('[') {
        Some(b) if name.ends_with(']') => &name[..b],
        _ => name,
    };
    !name.is_empty()
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Calls `f` on every simple command of `script`, including those inside compound
/// commands and substitutions, in source order.
pub fn for_each_simple_command<'s>(script: &'s Script, f: &mut dyn FnMut(&'s SimpleCommand)) {
    for item in &script.items {
        for pipeline in &item.and_or.pipelines {
            for stage in &pipeline.stages {
                match stage {
                    Command::Simple(c) => {
                        f(c);
                        for w in c
                            .assignments
                            .iter()
                            .chain(&c.words)
                            .chain(c.redirects.iter().filter_map(|r| r.target.as_ref()))
                        {
                            for s in &w.substitutions {
                                for_each_simple_command(&s.script, f);
                            }
                        }
                    }
                    Command::Compound(c) => {
                        for s in c.conditions.iter().chain(&c.bodies) {
                            for_each_simple_command(s, f);
                        }
                        for w in c.redirects.iter().filter_map(|r| r.target.as_ref()) {
                            for s in &w.substitutions {
                                for_each_simple_command(&s.script, f);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Calls `f` on every word of `script` (command words, assignments, redirection
/// targets), including words inside compound commands and substitutions.
pub fn for_each_word<'s>(script: &'s Script, f: &mut dyn FnMut(&'s Word)) {
    fn word<'s>(w: &'s Word, f: &mut dyn FnMut(&'s Word)) {
        f(w);
        for s in &w.substitutions {
            for_each_word(&s.script, f);
        }
    }
    for item in &script.items {
        for pipeline in &item.and_or.pipelines {
            for stage in &pipeline.stages {
                match stage {
                    Command::Simple(c) => {
                        for w in c
                            .assignments
                            .iter()
                            .chain(&c.words)
                            .chain(c.redirects.iter().filter_map(|r| r.target.as_ref()))
                        {
                            word(w, f);
                        }
                    }
                    Command::Compound(c) => {
                        for s in c.conditions.iter().chain(&c.bodies) {
                            for_each_word(s, f);
                        }
                        for w in c.redirects.iter().filter_map(|r| r.target.as_ref()) {
                            word(w, f);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simple(c: &Command) -> &SimpleCommand {
        match c {
            Command::Simple(s) => s,
            Command::Compound(c) => panic!("expected a simple command, got {c:?}"),
        }
    }

    fn compound(c: &Command) -> &CompoundCommand {
        match c {
            Command::Compound(c) => c,
            Command::Simple(s) => panic!("expected a compound command, got {s:?}"),
        }
    }

    fn words(c: &Command) -> Vec<&str> {
        simple(c).words.iter().map(|w| w.text.as_str()).collect()
    }

    fn stages(script: &Script, item: usize) -> &[Command] {
        &script.items[item].and_or.pipelines[0].stages
    }

    #[test]
    fn pipeline_stages_and_words() {
        let s = parse("tail -F /var/log/app.log | grep --line-buffered 'ERROR|WARN'");
        assert_eq!(s.items.len(), 1);
        let st = stages(&s, 0);
        assert_eq!(st.len(), 2);
        assert_eq!(words(&st[0]), ["tail", "-F", "/var/log/app.log"]);
        assert_eq!(words(&st[1]), ["grep", "--line-buffered", "ERROR|WARN"]);
        assert!(simple(&st[1]).words[2].quoted);
        assert!(!simple(&st[1]).words[1].quoted);
    }

    #[test]
    fn spans_point_into_the_source() {
        let src = "a  | b \"c d\"";
        let s = parse(src);
        let st = stages(&s, 0);
        assert_eq!(simple(&st[0]).span, 0..1);
        let w = &simple(&st[1]).words[1];
        assert_eq!(w.raw(src), "\"c d\"");
        assert_eq!(w.text, "c d");
        assert_eq!(simple(&st[1]).span, 5..12);
    }

    #[test]
    fn operators_inside_quotes_are_text() {
        let s = parse(r#"echo "a | b && c; d &" 'e|f' g\|h"#);
        assert_eq!(s.items.len(), 1);
        let st = stages(&s, 0);
        assert_eq!(st.len(), 1);
        assert_eq!(words(&st[0]), ["echo", "a | b && c; d &", "e|f", "g|h"]);
    }

    #[test]
    fn lists_and_or_background() {
        let s = parse("a && b || c; d & e\nf");
        assert_eq!(s.items.len(), 4);
        assert_eq!(s.items[0].and_or.pipelines.len(), 3);
        assert_eq!(
            s.items[0].and_or.connectors,
            [Connector::And, Connector::Or]
        );
        assert!(s.items[0].background.is_none());
        assert_eq!(s.items[1].background, Some(15..16));
        assert!(s.items[2].background.is_none());
        assert_eq!(words(&stages(&s, 3)[0]), ["f"]);
    }

    #[test]
    fn trailing_background() {
        let s = parse("tail -F x | grep y &");
        assert_eq!(s.items.len(), 1);
        assert!(s.items[0].background.is_some());
    }

    #[test]
    fn redirections() {
        let s = parse("grep x f 2>&1 >/dev/null < in &> all");
        let c = simple(&stages(&s, 0)[0]);
        assert_eq!(c.words.len(), 3);
        assert_eq!(c.redirects.len(), 4);
        assert_eq!(c.redirects[0].fd, Some(2));
        assert_eq!(c.redirects[0].op, RedirectOp::DupOut);
        assert!(!c.redirects[0].redirects_stdout());
        assert!(c.redirects[1].redirects_stdout());
        assert!(c.redirects[2].redirects_stdin());
        assert!(c.redirects[3].redirects_stdout());
    }

    #[test]
    fn pipe_amp_is_a_pipe() {
        let s = parse("make |& grep -i error");
        assert_eq!(stages(&s, 0).len(), 2);
    }

    #[test]
    fn command_substitution_is_nested() {
        let s = parse("echo \"$(tail -n1 log | grep x)\" done");
        let c = simple(&stages(&s, 0)[0]);
        assert_eq!(c.words.len(), 3);
        let sub = &c.words[1].substitutions[0];
        assert_eq!(sub.kind, SubstitutionKind::Command);
        assert_eq!(sub.script.items[0].and_or.pipelines[0].stages.len(), 2);
        assert_eq!(c.words[2].text, "done");
    }

    #[test]
    fn nested_substitution_with_parens_in_quotes() {
        let s = parse("x=$(echo \")\" $(date)) && echo ok");
        assert_eq!(s.items.len(), 1);
        let first = simple(&s.items[0].and_or.pipelines[0].stages[0]);
        assert_eq!(first.assignments.len(), 1);
        assert_eq!(first.words.len(), 0);
        assert_eq!(s.items[0].and_or.pipelines.len(), 2);
    }

    #[test]
    fn backticks_and_process_substitution() {
        let s = parse("diff <(sort a) >(cat) `ls | head -1`");
        let c = simple(&stages(&s, 0)[0]);
        assert_eq!(c.words.len(), 4);
        assert_eq!(
            c.words[1].substitutions[0].kind,
            SubstitutionKind::ProcessInput
        );
        assert_eq!(
            c.words[2].substitutions[0].kind,
            SubstitutionKind::ProcessOutput
        );
        let bt = &c.words[3].substitutions[0];
        assert_eq!(bt.kind, SubstitutionKind::Backtick);
        assert_eq!(bt.script.items[0].and_or.pipelines[0].stages.len(), 2);
    }

    #[test]
    fn expansions_remember_quoting() {
        let s =
            parse(r#"sh ${CLAUDE_PLUGIN_ROOT}/a.sh "$CLAUDE_PLUGIN_DATA/x" '${NOT}' "${A:-b}""#);
        let c = simple(&stages(&s, 0)[0]);
        let e1 = &c.words[1].expansions[0];
        assert_eq!(
            (e1.name.as_str(), e1.quoted, e1.braced),
            ("CLAUDE_PLUGIN_ROOT", false, true)
        );
        let e2 = &c.words[2].expansions[0];
        assert_eq!((e2.name.as_str(), e2.quoted), ("CLAUDE_PLUGIN_DATA", true));
        assert!(c.words[3].expansions.is_empty());
        assert_eq!(c.words[4].expansions[0].name, "A");
        assert_eq!(c.words[4].expansions[0].span, 64..71);
    }

    #[test]
    fn if_while_for_case_group_subshell() {
        let s = parse(
            "if grep -q x f; then echo a; elif true; then :; else echo b; fi; \
             while true; do tail -1 f; sleep 1; done | grep y; \
             for f in a b; do echo $f; done; \
             case $x in a|b) echo ab;; *) echo other;; esac; \
             { echo g; } > out; (cd /tmp && ls)",
        );
        assert_eq!(s.items.len(), 6);
        let iff = compound(&stages(&s, 0)[0]);
        assert_eq!(iff.kind, CompoundKind::If);
        assert_eq!(iff.conditions.len(), 2);
        assert_eq!(iff.bodies.len(), 3);
        let wh = stages(&s, 1);
        assert_eq!(wh.len(), 2);
        assert_eq!(compound(&wh[0]).kind, CompoundKind::While);
        assert_eq!(compound(&wh[0]).bodies[0].items.len(), 2);
        assert_eq!(words(&wh[1]), ["grep", "y"]);
        assert_eq!(compound(&stages(&s, 2)[0]).kind, CompoundKind::For);
        let case = compound(&stages(&s, 3)[0]);
        assert_eq!(case.kind, CompoundKind::Case);
        assert_eq!(case.bodies.len(), 2);
        let group = compound(&stages(&s, 4)[0]);
        assert_eq!(group.kind, CompoundKind::Group);
        assert!(group.redirects[0].redirects_stdout());
        assert_eq!(compound(&stages(&s, 5)[0]).kind, CompoundKind::Subshell);
    }

    #[test]
    fn reserved_words_are_plain_words_as_arguments() {
        let s = parse("echo done if then fi");
        assert_eq!(
            words(&stages(&s, 0)[0]),
            ["echo", "done", "if", "then", "fi"]
        );
    }

    #[test]
    fn functions() {
        let s = parse("f() { tail -F x; }; g () ( ls ); function h { echo; }; f");
        assert_eq!(s.items.len(), 4);
        for i in 0..3 {
            assert_eq!(compound(&stages(&s, i)[0]).kind, CompoundKind::FunctionDef);
        }
    }

    #[test]
    fn double_bracket_and_arithmetic() {
        let s = parse("[[ -f a && b < c ]] && (( i++ )) && for ((i=0;i<3;i++)); do echo; done");
        assert_eq!(s.items.len(), 1);
        let p = &s.items[0].and_or.pipelines;
        assert_eq!(p.len(), 3);
        assert_eq!(
            words(&p[0].stages[0]),
            ["[[", "-f", "a", "&&", "b", "<", "c", "]]"]
        );
        assert_eq!(words(&p[1].stages[0]), ["(( i++ ))"]);
        assert_eq!(compound(&p[2].stages[0]).kind, CompoundKind::For);
    }

    #[test]
    fn comments_and_continuations() {
        let s = parse("tail -F a \\\n  | grep b # | not a pipe\necho c");
        assert_eq!(s.items.len(), 2);
        assert_eq!(stages(&s, 0).len(), 2);
        assert_eq!(words(&stages(&s, 0)[1]), ["grep", "b"]);
    }

    #[test]
    fn heredoc_bodies_are_skipped() {
        let s = parse("cat <<EOF | grep x\na | b; c\nEOF\necho d");
        assert_eq!(s.items.len(), 2);
        assert_eq!(stages(&s, 0).len(), 2);
        assert_eq!(words(&stages(&s, 1)[0]), ["echo", "d"]);
    }

    #[test]
    fn assignments_and_negation() {
        let s = parse("A=1 B=\"x y\" cmd arg; ! grep -q x f");
        let c = simple(&stages(&s, 0)[0]);
        assert_eq!(c.assignments.len(), 2);
        assert_eq!(c.words.len(), 2);
        assert!(s.items[1].and_or.pipelines[0].negated);
    }

    #[test]
    fn malformed_input_does_not_panic() {
        for src in [
            "",
            "|",
            ")",
            "fi",
            "done done",
            "echo 'unterminated",
            "echo \"unterminated $(",
            "$(",
            "`",
            "${",
            "a | | b",
            "if then",
            "case",
            "for",
            "((",
            "<(",
            "&&",
            ";;",
            "2>",
            "a <<",
            "é | ü",
            "echo \\",
            "f() ",
            "x=$((1+(2)",
        ] {
            let _ = parse(src);
        }
        let deep = "$(".repeat(500);
        let _ = parse(&deep);
        let deep = "(".repeat(500);
        let _ = parse(&deep);
        let deep = "{ ".repeat(500);
        let _ = parse(&deep);
    }

    #[test]
    fn unicode_words() {
        let s = parse("grep 'héllo' | sed s/é/e/");
        assert_eq!(words(&stages(&s, 0)[1]), ["sed", "s/é/e/"]);
    }

    #[test]
    fn visitors_reach_nested_commands() {
        let s = parse("while true; do x=$(tail -1 f | cut -d' ' -f1); done");
        let mut names = Vec::new();
        for_each_simple_command(&s, &mut |c| {
            names.push(c.words.first().map(|w| w.text.clone()).unwrap_or_default())
        });
        assert_eq!(names, ["true", "", "tail", "cut"]);
        let mut n = 0;
        for_each_word(&s, &mut |_| n += 1);
        assert_eq!(n, 8);
    }
}

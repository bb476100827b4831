/*
 * errordb explain box: paste a traceback, see which known errors it is.
 *
 * The same rules as `errordb explain` (docs/matching.md, errordb/match.py), run in the browser
 * on the exported patterns (api/patterns.json):
 *   message: full match +100 (whole message, its first line, or its lines joined where a
 *            terminal wrapped them), partial match +40 (the pattern
 *            inside the message, or a message cut short that starts one it matches), else no match;
 *            and round(5 * min(w, 100) / 100, 1) for the w letters and digits of literal text the
 *            pattern requires (that the cut message holds);
 *   class:   agrees +30 (equal, or equal last dotted part), differs -30 (no match at all for a
 *            generic pattern, or when the innermost frame is in another installed package than
 *            the record's), not given 0; a pattern "" (a class raised without a message)
 *            matches only an empty message;
 *   frames:  the best frame in the record's file (same last path components): +20, function +10,
 *            line +10, or round(10 * max(0, 1 - d / 200), 1) when d lines away; else a frame of
 *            the record's file name and package (moved) in its function: +10; else the innermost
 *            frame, in the record's package, printing the record's raise line (raiseLine, at
 *            least 24 letters and digits besides `raise X`/`assert`: moved): +10; none at all when
 *            the innermost frame is in the record's file but in another function;
 *   near:    no pattern match, but the innermost frame in the record's file and function, the
 *            class agreeing and the words 60% alike (reworded between versions): +30, + class,
 *            + frames;
 *   rank:    score (rounded to 0.1), then record id; equal top scores are "equally likely".
 * The traceback parsing is simpler than errordb's: ANSI codes and common log prefixes are
 * stripped, the last "Traceback (most recent call last):" block is read (frames and the final
 * "Class: message" line); without one, a "Class: message" line or the bare text is the message.
 *
 * Everything shown is built with textContent: record text is never parsed as HTML.
 */
(function () {
  "use strict";

  var FULL_MATCH = 100, PARTIAL_MATCH = 40, CLASS_AGREES = 30, CLASS_DIFFERS = -30;
  var FRAME_FILE = 20, FRAME_FUNCTION = 10, FRAME_LINE = 10, FRAME_SOURCE = 10, LINE_HORIZON = 200, SPECIFIC_LITERAL = 24;
  var SPECIFIC_POINTS = 5, SPECIFIC_MAX = 100;
  // CPython's builtin exception classes (3.8 to 3.13).
  var BUILTIN_EXCEPTIONS = new Set(("ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup " +
    "BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError ConnectionError " +
    "ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError EncodingWarning EnvironmentError Exception " +
    "ExceptionGroup FileExistsError FileNotFoundError FloatingPointError FutureWarning GeneratorExit IOError ImportError " +
    "ImportWarning IndentationError IndexError InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError " +
    "MemoryError ModuleNotFoundError NameError NotADirectoryError NotImplementedError OSError OverflowError " +
    "PendingDeprecationWarning PermissionError ProcessLookupError PythonFinalizationError RecursionError ReferenceError " +
    "ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration StopIteration SyntaxError SyntaxWarning SystemError " +
    "SystemExit TabError TimeoutError TypeError UnboundLocalError UnicodeDecodeError UnicodeEncodeError UnicodeError " +
    "UnicodeTranslateError UnicodeWarning UserWarning ValueError Warning ZeroDivisionError _IncompleteInputError").split(" "));

  // ---------------------------------------------------------------- parsing

  var ANSI = /\x1b\[[0-9;?]*[ -\/]*[@-~]/g;
  // "[2026-08-28 05:10:05 TP0] ", "[rank3]: ", "[1,0]<stderr>: " (a bracket holding a digit).
  var BRACKET_PREFIX = /^\[[^\]\n]{0,80}\d[^\]\n]{0,80}\](?:<\w+>)?:?[ \t]?/;
  // "2026-08-28 05:10:05,123 ERROR " or "2026-08-28T05:10:05Z - ERROR - ".
  var TIME_PREFIX = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?(?:\s*[-|]\s*|\s+)(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?:\s*[-|:]\s*|\s+))?/;
  // Anywhere in a line: "Scheduler hit an exception: Traceback (most recent call last):".
  var TRACEBACK = /Traceback \(most recent call last\):\s*$/;
  var FRAME = /^\s*File "(.+)", line (\d+)(?:, in (.+?))?\s*$/;
  var CHAIN = /^(?:During handling of the above exception|The above exception was the direct cause)/;
  var DOTTED = "[A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)*";
  var EXCEPTION_LINE = new RegExp("^(" + DOTTED + ")(?::[ \\t]?(.*))?$");
  var EXCEPTION_NAME = /(?:Error|Exception|Warning|Interrupt|Exit|Iteration|Timeout)$/;

  function stripPrefixes(line) {
    var before;
    do {
      before = line;
      line = line.replace(BRACKET_PREFIX, "").replace(TIME_PREFIX, "");
    } while (line !== before);
    return line;
  }

  function splitLines(text) {
    return String(text).replace(ANSI, "").replace(/\r\n?/g, "\n").split("\n").map(function (raw) {
      var line = stripPrefixes(raw);
      return { text: line, prefixed: line !== raw };
    });
  }

  function shortClass(name) {
    if (!name) return name;
    var parts = name.split(".");
    return parts[parts.length - 1];
  }

  /**
   * Parse pasted text into a list of exceptions, each {type, message, frames: [{file, line, function}]}.
   * Every "Traceback (most recent call last):" starts one (a chain gives several); without any,
   * each "SomeError: message" line is one; else a lone line is a bare message; else nothing.
   */
  function parse(text) {
    var lines = splitLines(text);
    var found = [];
    for (var i = 0; i < lines.length; i++) {
      if (TRACEBACK.test(lines[i].text)) {
        var exc = parseBlock(lines, i + 1);
        if (exc) found.push(exc);
      }
    }
    if (!found.length) {
      lines.forEach(function (line) {
        var parsed = exceptionLine(line.text.trim(), false);
        if (parsed) found.push({ type: parsed.type, message: parsed.message, frames: [] });
      });
    }
    if (!found.length) {
      var filled = lines.filter(function (l) { return l.text.trim() !== ""; });
      if (filled.length === 1) found.push({ type: null, message: filled[0].text.trim(), frames: [] });
    }
    // Ranks of a distributed job print one traceback many times: keep each exception once.
    var seen = new Set();
    return found.filter(function (exc) {
      var key = JSON.stringify([exc.type, exc.message, exc.frames]);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  function parseBlock(lines, j) {
    var frames = [];
    var awaitingSource = null; // the frame just read, whose source line may follow
    while (j < lines.length) {
      var line = lines[j].text;
      var m = FRAME.exec(line);
      if (m) {
        var frame = { file: m[1], line: parseInt(m[2], 10), "function": m[3] === undefined ? null : m[3], source: null };
        var last = frames[frames.length - 1];
        awaitingSource = null;
        // Interleaved ranks print each frame several times in a row; once is enough (the best
        // frame, hence the score, is the same either way).
        if (!last || last.file !== frame.file || last.line !== frame.line || last["function"] !== frame["function"]) {
          frames.push(frame);
          awaitingSource = frame;
        }
      } else if (line.trim() !== "" && !/^\s/.test(line) && !TRACEBACK.test(line)) {
        break; // the first unindented line after the frames is the exception
      } else if (awaitingSource && line.trim() !== "") {
        awaitingSource.source = line.trim();
        awaitingSource = null;
      }
      j++;
    }
    if (j >= lines.length) return null;
    var parsed = exceptionLine(lines[j].text, true);
    if (!parsed) return null;
    var message = [parsed.message];
    for (var k = j + 1; k < lines.length; k++) {
      var next = lines[k];
      if (next.text.trim() === "" || next.prefixed || TRACEBACK.test(next.text) || CHAIN.test(next.text)) break;
      message.push(next.text);
    }
    return { type: parsed.type, message: message.join("\n"), frames: frames };
  }

  function exceptionLine(line, afterFrames) {
    var m = EXCEPTION_LINE.exec(line);
    if (!m) return null;
    // Outside a traceback only a name that reads like an exception class counts, so that
    // "Note: something" stays a bare message.
    if (!afterFrames && !EXCEPTION_NAME.test(shortClass(m[1]))) return null;
    if (!afterFrames && m[2] === undefined) return null;
    return { type: m[1], message: m[2] === undefined ? "" : m[2] };
  }

  // ---------------------------------------------------------------- patterns

  /** An RE2 pattern (the record's messagePattern) as a JavaScript RegExp source and flags. */
  function translate(pattern) {
    var flags = "";
    var lead = /^\(\?([imsU]+)\)/.exec(pattern);
    if (lead) {
      if (lead[1].indexOf("i") >= 0) flags += "i";
      if (lead[1].indexOf("m") >= 0) flags += "m";
      if (lead[1].indexOf("s") >= 0) flags += "s";
      pattern = pattern.slice(lead[0].length);
    }
    var out = "", inClass = false;
    for (var i = 0; i < pattern.length; i++) {
      var c = pattern[i];
      if (c === "\\" && i + 1 < pattern.length) {
        var d = pattern[i + 1];
        if (!inClass && d === "A") out += "^";
        else if (!inClass && d === "z") out += "$";
        else out += c + d;
        i++;
      } else if (inClass) {
        if (c === "]") inClass = false;
        out += c;
      } else if (c === "[") {
        inClass = true;
        out += c;
        if (pattern[i + 1] === "^") { out += "^"; i++; }
        if (pattern[i + 1] === "]") { out += "\\]"; i++; } // a leading ] is a literal in RE2
      } else if (c === "(" && pattern.slice(i, i + 4) === "(?P<") {
        out += "(?<";
        i += 3;
      } else {
        out += c;
      }
    }
    return { source: out, flags: flags };
  }

  function compile(source, flags) {
    // RE2's \d \w \s are ASCII, like JavaScript's without the u flag; \p{..} needs the u flag.
    var order = /\\[pP]/.test(source) ? [flags + "u", flags] : [flags, flags + "u"];
    for (var i = 0; i < order.length; i++) {
      try { return new RegExp(source, order[i]); } catch (e) { /* try the other mode */ }
    }
    return null;
  }

  var compiled = new Map();
  function matchers(entry) {
    var cached = compiled.get(entry.messagePattern);
    if (cached === undefined) {
      var t = translate(entry.messagePattern);
      var full = compile("^(?:" + t.source + ")$", t.flags);
      var partial = compile(t.source, t.flags);
      cached = full && partial ? { full: full, partial: partial } : null;
      compiled.set(entry.messagePattern, cached);
    }
    return cached;
  }

  // ---------------------------------------------------------------- scoring

  /** Python's round(x, 1): correctly rounded, exact halves to even. */
  function round1(x) {
    var exact = x.toFixed(20);
    var tie = /^-?\d+\.\d50*$/.test(exact);
    if (!tie) return Number(x.toFixed(1));
    var tenths = Math.trunc(x * 10);
    if (Math.abs(tenths) % 2 === 1) tenths += x < 0 ? -1 : 1;
    return tenths / 10;
  }

  function components(path) {
    return String(path || "").replace(/\\/g, "/").split("/").filter(function (p) { return p !== ""; });
  }

  var SOURCE_ROOTS = new Set(["python", "src", "lib", "source"]);

  /**
   * Whether a frame's file is the record's file: the frame's path ends with the record's whole
   * path, or with all of it but a source root (an installed package drops the repository's
   * "python/" or "src/" and adds its own "site-packages/").
   */
  function sameFile(framePath, recordPath) {
    var a = components(framePath), b = components(recordPath);
    var common = 0;
    while (common < Math.min(a.length, b.length) && a[a.length - 1 - common] === b[b.length - 1 - common]) common++;
    var needed = b.length > 2 && SOURCE_ROOTS.has(b[0]) ? b.length - 1 : b.length;
    if (common >= needed) return true;
    // CPython's Lib/ is installed as lib/pythonX.Y/: Lib/argparse.py shares only its file name.
    return b.length >= 2 && b[0] === "Lib" && common === b.length - 1 &&
      a.length > common && /^python\d+(?:\.\d+)?t?$/.test(a[a.length - 1 - common]);
  }

  /**
   * Whether a frame's file may be the record's, moved to another folder of its package: the
   * same file name, in the record's top-level package (the first folder of its path after a
   * source root; the frame's folder after site-packages/ or dist-packages/, else any of its
   * folders). errordb/explainer/match.py, moved_file.
   */
  function movedFile(framePath, recordPath) {
    var parts = packagePath(recordPath), frame = components(framePath);
    if (parts.length < 2 || frame.length === 0 || frame[frame.length - 1] !== parts[parts.length - 1]) return false;
    return inPackage(framePath, parts[0]);
  }

  /**
   * Whether a frame's file is in a top-level package: the folder after site-packages/ or
   * dist-packages/ when it has one, else any folder of its path. errordb/explainer/match.py, in_package.
   */
  function inPackage(framePath, pkg) {
    var installed = installedPackage(framePath);
    if (installed !== undefined) return installed === pkg;
    return components(framePath).slice(0, -1).indexOf(pkg) >= 0;
  }

  /**
   * The innermost frame, in the record's package, prints the record's raise statement (of
   * SPECIFIC_LITERAL word characters at least besides its keyword and class): the raise moved.
   * errordb/explainer/match.py, _prints_the_raise.
   */
  function printsTheRaise(record, frame) {
    var source = (frame.source || "").trim();
    // Not counting the statement's keyword and the class it raises (match.py, _STATEMENT_HEAD).
    if (wordCharacters(source.replace(/^(?:raise\s+[\w.]+|assert\b)/, "")) < SPECIFIC_LITERAL || !frame.file) return false;
    return record.raiseLine !== null && record.raiseLine !== undefined && record.raiseLine === source &&
      inPackage(frame.file, packagePath(record.filePath)[0]);
  }

  /** A record's path from its top-level package on (its repository's source root left off). */
  function packagePath(recordPath) {
    var parts = components(recordPath);
    return parts.length > 2 && SOURCE_ROOTS.has(parts[0]) ? parts.slice(1) : parts;
  }

  /**
   * The package a frame's file is installed in: the folder after its last site-packages/ or
   * dist-packages/ ("" for a module right in it; undefined: not an installed package's file).
   */
  function installedPackage(framePath) {
    var folders = components(framePath).slice(0, -1);
    var markers = ["site-packages", "dist-packages"];
    for (var i = 0; i < markers.length; i++) {
      var at = folders.lastIndexOf(markers[i]);
      if (at >= 0) return at + 1 < folders.length ? folders[at + 1] : "";
    }
    return undefined;
  }

  /**
   * The innermost frame, where it was raised, is in an installed package other than the
   * record's: under another class, its message only quotes the record's words.
   * errordb/explainer/match.py, raised_in_another_package.
   */
  function raisedInAnotherPackage(record, frames) {
    var inner = frames.length ? installedPackage(frames[frames.length - 1].file) : undefined;
    return inner !== undefined && inner !== "" && inner !== packagePath(record.filePath)[0];
  }

  function bestFrame(record, frames) {
    var best = null;
    // A traceback prints a function's own name; the record may know its qualified name.
    var name = record["function"] ? record["function"].split(".").pop() : "";
    var innermost = frames.length ? frames[frames.length - 1] : null;
    // The innermost frame, where it was raised, is another function of the record's file: no frame counts.
    if (innermost && name && innermost["function"] && innermost["function"] !== name && sameFile(innermost.file, record.filePath)) return [];
    frames.forEach(function (frame) { // outermost first: a later (inner) frame wins a tie
      if (!sameFile(frame.file, record.filePath)) {
        // The file may have moved to another folder of its package: its function still tells.
        if (name && frame["function"] === name && movedFile(frame.file, record.filePath) && (best === null || FRAME_FUNCTION >= best.total)) {
          best = { total: FRAME_FUNCTION, evidence: [{ kind: "frame-function", points: FRAME_FUNCTION, detail: "in " + frame["function"] + ", the function that raises it (its file has moved)" }] };
        }
        return;
      }
      var found = [{ kind: "frame-file", points: FRAME_FILE, detail: "a frame is in " + record.filePath }];
      if (name && frame["function"] === name) {
        found.push({ kind: "frame-function", points: FRAME_FUNCTION, detail: "in " + frame["function"] + ", the function that raises it" });
      }
      if (frame.line !== null && frame.line !== undefined) {
        var distance = Math.abs(frame.line - record.lineNumber);
        if (distance === 0) {
          found.push({ kind: "frame-line", points: FRAME_LINE, detail: "at line " + frame.line + ", the record's line" });
        } else {
          var points = round1(FRAME_LINE * Math.max(0, 1 - distance / LINE_HORIZON));
          if (points > 0) found.push({ kind: "frame-line", points: points, detail: "at line " + frame.line + ", " + distance + " lines from the record's " + record.lineNumber });
        }
      }
      var total = found.reduce(function (sum, e) { return sum + e.points; }, 0);
      if (best === null || total >= best.total) best = { total: total, evidence: found };
    });
    if (best === null && innermost && printsTheRaise(record, innermost)) {
      return [{ kind: "frame-source", points: FRAME_SOURCE, detail: innermost.file + " prints the statement that raises it: moved from " + record.filePath }];
    }
    return best ? best.evidence : [];
  }

  /** How many [A-Za-z0-9_] a text holds. */
  function wordCharacters(text) {
    var words = String(text).match(/\w/g);
    return words ? words.length : 0;
  }

  /** Word characters of a pattern's literal text (not of escapes, character sets, inline flags). */
  function literalWeight(pattern) {
    return wordCharacters(String(pattern).replace(/\\.|\[(?:\\.|[^\]])*\]|\(\?[A-Za-z]+\)/g, ""));
  }

  /** Whether the record raises a class of its own project (not a builtin, not another package's). */
  function ownClass(record) {
    var name = record.errorClass.split("(")[0];
    if (BUILTIN_EXCEPTIONS.has(shortClass(name))) return false;
    return name.indexOf(".") < 0 || components(record.filePath).indexOf(name.split(".")[0]) >= 0;
  }

  // A simple pattern: literal text and common holes (errordb/records/patterns.py, _SIMPLE_HOLES).
  var SIMPLE_HOLES = "\\(\\.\\+\\)|\\(\\.\\+\\?\\)|\\(\\.\\*\\)|\\(\\.\\*\\?\\)|\\.\\+|\\.\\*|\\(\\\\d\\+\\)|-\\?\\\\d\\+|" +
    "\\\\d\\+|\\(\\\\S\\+\\)|\\\\S\\+|\\(\\\\w\\+\\)|\\\\w\\+";
  var SIMPLE_PATTERN = new RegExp("^(?:" + SIMPLE_HOLES + "|\\\\[^A-Za-z0-9]|[^\\\\\\[\\](){}.*+?^$|])*$");
  var SIMPLE_TOKEN = new RegExp("(" + SIMPLE_HOLES + ")|\\\\([^A-Za-z0-9])|([^\\\\\\[\\](){}.*+?^$|])", "g");

  /** A simple pattern's literal runs and holes (null) in order; null for any other pattern. */
  function simpleTokens(pattern) {
    if (!SIMPLE_PATTERN.test(pattern)) return null;
    var tokens = [], run = "", m;
    SIMPLE_TOKEN.lastIndex = 0;
    while ((m = SIMPLE_TOKEN.exec(pattern)) !== null) {
      if (m[1] !== undefined) {
        if (run) { tokens.push(run); run = ""; }
        if (tokens.length === 0 || tokens[tokens.length - 1] !== null) tokens.push(null); // holes side by side are one
      } else {
        run += m[2] !== undefined ? m[2] : m[3];
      }
    }
    if (run) tokens.push(run);
    return tokens;
  }

  /** Whether the text a cut message ends with, inside a hole, is more than one value (patterns.py, _holds_words). */
  function holdsWords(text) {
    return /[ \t\n\r\f\v]/.test(text.replace(/^[ \t\n\r\f\v]+|[ \t\n\r\f\v]+$/g, ""));
  }

  /** "head" of a pattern "head(?:...)?" (the group at the top level, no "|" outside it). */
  function headBeforeOptionalGroup(pattern) {
    if (pattern.slice(-2) !== ")?") return null;
    var depth = 0, start = -1, index = 0;
    while (index < pattern.length) {
      var c = pattern[index];
      if (c === "\\") { index += 2; continue; }
      if (c === "[") {
        index += pattern[index + 1] === "^" ? 2 : 1;
        if (pattern[index] === "]") index += 1;
        while (index < pattern.length && pattern[index] !== "]") index += pattern[index] === "\\" ? 2 : 1;
      } else if (c === "(") {
        if (depth === 0) start = index;
        depth += 1;
      } else if (c === ")") {
        depth -= 1;
        if (depth === 0 && index === pattern.length - 2 && pattern.slice(start, start + 3) === "(?:") return pattern.slice(0, start);
      } else if (c === "|" && depth === 0) {
        return null;
      }
      index += 1;
    }
    return null;
  }

  /**
   * When a message could be the start of one the pattern matches (it was cut short), the
   * literal text of the pattern it holds; else null (errordb/records/patterns.py, cut_match).
   */
  function cutMatch(pattern, message) {
    var tokens = simpleTokens(pattern), head;
    if (tokens === null && (head = headBeforeOptionalGroup(pattern))) tokens = simpleTokens(head);
    if (!tokens || tokens.length === 0) return null;
    var held = "", pos = 0, start = 0;
    if (tokens[0] !== null) {
      var first = tokens[0];
      if (message.indexOf(first) === 0) {
        if (tokens.length === 1 && message.length > first.length) return null;
        held = first;
        pos = first.length;
      } else if (first.indexOf(message) === 0) {
        return message || null;
      } else {
        return null;
      }
      start = 1;
    }
    for (var index = start; index < tokens.length - 1; index += 2) {
      var run = tokens[index + 1];
      var found = message.indexOf(run, pos);
      if (found < 0) {
        var tail = "";
        for (var k = Math.min(run.length, message.length - pos); k > 0; k--) {
          if (message.slice(message.length - k) === run.slice(0, k)) { tail = run.slice(0, k); break; }
        }
        if (!tail && holdsWords(message.slice(pos))) return null;
        held += tail;
        break;
      }
      if (index + 2 === tokens.length && found + run.length < message.length) {
        if (holdsWords(message.slice(pos))) return null;
        break;
      }
      held += run;
      pos = found + run.length;
    }
    return held || null;
  }

  /** Whether a match with no frame in the record's file stands on its message and class. */
  function saysEnough(record, evidence, weight, cut) {
    var kinds = evidence.map(function (e) { return e.kind; });
    if (cut) return kinds.indexOf("class-differs") < 0 && weight >= SPECIFIC_LITERAL;
    if (kinds.indexOf("class-differs") >= 0 && kinds.indexOf("message-full") >= 0) return false;
    if (weight >= SPECIFIC_LITERAL) return true;
    return kinds.indexOf("class-agrees") >= 0 && ownClass(record);
  }

  /** Score one record against one parsed exception; null when its pattern does not match. */
  function score(record, exc) {
    var m = matchers(record);
    if (!m) return null;
    var text = exc.message.trim();
    var firstLine = text.split("\n")[0];
    var evidence = [], held = null, joined;
    if (record.messagePattern === "" && text !== "") return null; // a class raised without a message
    if (m.full.test(text)) {
      evidence.push({ kind: "message-full", points: FULL_MATCH, detail: "the pattern matches the whole message" });
    } else if (firstLine !== text && m.full.test(firstLine)) {
      evidence.push({ kind: "message-full", points: FULL_MATCH, detail: "the pattern matches the message's first line" });
    } else if ((joined = text.replace(/[ \t]*\n[ \t\n]*/g, " ")) !== text && m.full.test(joined)) {
      evidence.push({ kind: "message-full", points: FULL_MATCH, detail: "the pattern matches the whole message, its lines joined (a terminal wrapped them)" });
    } else if (m.partial.test(text)) {
      evidence.push({ kind: "message-partial", points: PARTIAL_MATCH, detail: "the pattern matches part of the message" });
    } else if ((held = cutMatch(record.messagePattern, text)) !== null) {
      evidence.push({ kind: "message-partial", points: PARTIAL_MATCH, detail: "the message is cut short: it is the start of one the pattern matches" });
    } else {
      return null;
    }
    var weight = held !== null ? wordCharacters(held) : literalWeight(record.messagePattern);
    var points = round1(Math.min(weight, SPECIFIC_MAX) * SPECIFIC_POINTS / SPECIFIC_MAX);
    if (points) evidence.push({ kind: "message-specific", points: points, detail: "the pattern requires " + weight + " letters and digits of the message" });
    if (exc.type) {
      if (exc.type === record.errorClass || shortClass(exc.type) === shortClass(record.errorClass)) {
        evidence.push({ kind: "class-agrees", points: CLASS_AGREES, detail: "raised as " + exc.type + ", the record's class" });
      } else if (weight < SPECIFIC_LITERAL) {
        return null; // a generic message under another class is another exception, frames or not
      } else if (raisedInAnotherPackage(record, exc.frames)) {
        return null; // another class, raised in another package: the words are quoted, or its own
      } else {
        evidence.push({ kind: "class-differs", points: CLASS_DIFFERS, detail: "raised as " + exc.type + "; the record raises " + record.errorClass });
      }
    }
    var frameEvidence = bestFrame(record, exc.frames);
    if (frameEvidence.length === 0 && !saysEnough(record, evidence, weight, held !== null)) return null;
    evidence = evidence.concat(frameEvidence);
    var total = evidence.reduce(function (sum, e) { return sum + e.points; }, 0);
    return { record: record, score: round1(total), evidence: evidence };
  }

  function byScoreThenId(a, b) {
    if (a.score !== b.score) return b.score - a.score;
    return a.record.id < b.record.id ? -1 : a.record.id > b.record.id ? 1 : 0;
  }

  /** Every record matching one exception, best first. */
  function rank(records, exc) {
    var matches = [], unmatched = [];
    records.forEach(function (record) {
      var scored = score(record, exc);
      if (scored) matches.push(scored);
      else unmatched.push(record);
    });
    // Near matches only when no pattern matched at the raise (a frame in its file and function).
    var atTheRaise = matches.some(function (m) {
      var kinds = m.evidence.map(function (e) { return e.kind; });
      return kinds.indexOf("frame-file") >= 0 && kinds.indexOf("frame-function") >= 0;
    });
    if (!atTheRaise) {
      unmatched.forEach(function (record) {
        var near = nearMatch(record, exc);
        if (near) matches.push(near);
      });
    }
    return matches.sort(byScoreThenId);
  }

  var NEAR_MATCH = 30, NEAR_SIMILARITY = 0.6, NEAR_WORDS = 200;

  /**
   * How alike two messages read, word for word: [similarity, the words of the first replaced,
   * the words of the second in their place] (errordb/explainer/match.py, reworded).
   */
  function reworded(oldText, newText) {
    // A placeholder of the record's message ({n}, a value) is any one word of the other.
    var a = (String(oldText).match(/\{[^{}]*\}|\w+/g) || []).slice(0, NEAR_WORDS), b = (String(newText).match(/\w+/g) || []).slice(0, NEAR_WORDS);
    if (!a.length || !b.length) return [0, "", ""];
    var ANY = "\u0000";
    var la = a.map(function (w) { return w[0] === "{" ? ANY : w.toLowerCase(); }), lb = b.map(function (w) { return w.toLowerCase(); });
    var common = [];
    for (var i = 0; i <= a.length; i++) common.push(new Array(b.length + 1).fill(0));
    for (i = a.length - 1; i >= 0; i--) {
      for (var j = b.length - 1; j >= 0; j--) {
        common[i][j] = la[i] === lb[j] || la[i] === ANY ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
      }
    }
    var removed = [], added = [];
    i = 0; j = 0;
    while (i < a.length || j < b.length) { // the first run of differences, from the start
      if (i < a.length && j < b.length && (la[i] === lb[j] || la[i] === ANY)) {
        if (removed.length || added.length) break;
        i++; j++;
      } else if (j === b.length || (i < a.length && common[i + 1][j] >= common[i][j + 1])) {
        removed.push(a[i]); i++;
      } else {
        added.push(b[j]); j++;
      }
    }
    return [2 * common[0][0] / (a.length + b.length), removed.join(" "), added.join(" ")];
  }

  /** A record the innermost frame places at the raise, of the class printed, reworded (near_match). */
  function nearMatch(record, exc) {
    var frames = exc.frames;
    if (!frames.length || !exc.type || !record["function"]) return null;
    var innermost = frames[frames.length - 1];
    if (innermost["function"] !== record["function"].split(".").pop() || !sameFile(innermost.file, record.filePath)) return null;
    if (exc.type !== record.errorClass && shortClass(exc.type) !== shortClass(record.errorClass)) return null;
    var found = reworded(record.errorMessage, exc.message);
    if (found[0] < NEAR_SIMILARITY) return null;
    var change = "";
    if (found[1] && found[2]) change = ": the record's \u201c" + found[1] + "\u201d reads \u201c" + found[2] + "\u201d here";
    else if (found[1]) change = ": the record's \u201c" + found[1] + "\u201d is not here";
    else if (found[2]) change = ": \u201c" + found[2] + "\u201d is added here";
    var evidence = [
      { kind: "message-near", points: NEAR_MATCH, detail: "reworded, " + Math.floor(found[0] * 100 + 0.5) + "% of the words alike" + change },
      { kind: "class-agrees", points: CLASS_AGREES, detail: "raised as " + exc.type + ", the record's class" },
    ].concat(bestFrame(record, frames));
    var total = evidence.reduce(function (sum, e) { return sum + e.points; }, 0);
    return { record: record, score: round1(total), evidence: evidence };
  }

  /** Each record once, with its best match across all exceptions of the input, best first. */
  function rankAll(records, exceptions) {
    var best = new Map();
    exceptions.forEach(function (exc, index) {
      rank(records, exc).forEach(function (m) {
        var known = best.get(m.record.id);
        if (!known || m.score > known.score) {
          m.exception = index;
          best.set(m.record.id, m);
        }
      });
    });
    return Array.from(best.values()).sort(byScoreThenId);
  }

  function tellApart(best) {
    var places = best.map(function (m) {
      return m.record.filePath + ":" + m.record.lineNumber + " in " + (m.record["function"] || "?");
    }).join("; ");
    return best.length + " records share this message: " + places + ". The traceback's frames tell them apart: paste the whole traceback.";
  }

  // ---------------------------------------------------------------- loading patterns

  var patternsPromise = null;

  function loadPatterns(form) {
    if (patternsPromise) return patternsPromise;
    // Browsers refuse fetch() on file:// pages; say so instead of trying.
    if (location.protocol === "file:") return Promise.reject(new Error("file://"));
    var url = new URL(form.getAttribute("data-patterns"), document.baseURI);
    var root = new URL(form.getAttribute("data-root") || "./", document.baseURI);
    var base = form.getAttribute("data-base") || "/";
    function fetchJson(target) {
      return fetch(target, { credentials: "same-origin" }).then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status + " for " + target);
        return response.json();
      });
    }
    // A page URL of the export is "<base URL>api/…"; read it relative to this site's root, so
    // the site works wherever it is served.
    function pageUrl(href) {
      if (href.indexOf(base) === 0) return new URL(href.slice(base.length), root);
      return new URL(href, url);
    }
    patternsPromise = fetchJson(url).then(function (data) {
      if (Array.isArray(data)) return data;
      var items = (data.items || []).slice();
      var pages = (data.pages || []).map(function (p) { return fetchJson(pageUrl(p.url)); });
      return Promise.all(pages).then(function (rest) {
        rest.forEach(function (page) { items.push.apply(items, page.items || []); });
        return items;
      });
    });
    patternsPromise.catch(function () { patternsPromise = null; });
    return patternsPromise;
  }

  // ---------------------------------------------------------------- showing results

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function signed(points) { return (points >= 0 ? "+" : "−") + Math.abs(points); }

  function describe(exc) {
    var head = (exc.type ? exc.type + ": " : "") + exc.message.split("\n")[0];
    var frames = exc.frames.length ? " (" + exc.frames.length + " frame" + (exc.frames.length === 1 ? "" : "s") + ")" : "";
    return head + frames;
  }

  function show(result, exceptions, matches, errorsBase) {
    result.textContent = "";
    if (!exceptions.length) {
      result.appendChild(el("p", {}, ["No exception found in the input: paste a traceback, or one error message on its own."]));
      return;
    }
    var read = el("ul", { "class": "small read", "aria-label": "What was read" }, exceptions.map(function (exc) {
      return el("li", {}, ["Read: " + describe(exc)]);
    }));
    result.appendChild(read);
    if (!matches.length) {
      result.appendChild(el("p", { "class": "no-match" }, ["No known error matches this message. Try the search: a similar error may be listed under other words."]));
      return;
    }
    var best = matches.filter(function (m) { return m.score === matches[0].score; });
    if (best.length > 1) {
      result.appendChild(el("p", { "class": "tie", "data-tie": "true" }, ["Equally likely: " + tellApart(best)]));
    }
    var list = el("ol", { "class": "matches", "aria-label": "Matching errors, best first" });
    matches.slice(0, 10).forEach(function (m, index) {
      var r = m.record;
      var link = el("a", { href: errorsBase + encodeURIComponent(r.slug) + "/index.html" }, [r.errorMessage || r.errorClass]);
      var evidence = el("ul", { "class": "evidence", "aria-label": "Why" }, m.evidence.map(function (e) {
        return el("li", { "data-kind": e.kind, "data-points": String(e.points) }, [signed(e.points) + " " + e.kind.replace("-", " ") + ": " + e.detail]);
      }));
      var item = el("li", {
        "class": "match" + (m.score === matches[0].score ? " top" : ""),
        "data-record-id": r.id,
        "data-score": String(m.score),
        "data-rank": String(index + 1)
      }, [
        el("h3", {}, [link]),
        el("p", { "class": "small" }, [
          el("span", { "class": "score" }, ["score " + m.score]),
          " · " + r.errorClass + " · " + r.repo + " · " + r.filePath + ":" + r.lineNumber + (r["function"] ? " in " + r["function"] : "")
        ]),
        evidence
      ]);
      list.appendChild(item);
    });
    result.appendChild(list);
  }

  /** Explain ``text`` against the site's patterns: {exceptions, matches}. Used by the box and tests. */
  function explainText(text, form) {
    form = form || document.getElementById("explain-form");
    var exceptions = parse(text);
    return loadPatterns(form).then(function (records) {
      return { exceptions: exceptions, matches: rankAll(records, exceptions) };
    });
  }

  function start() {
    var form = document.getElementById("explain-form");
    if (!form) return;
    var input = document.getElementById("explain-input");
    var result = document.getElementById("explain-result");
    var errorsBase = form.getAttribute("data-errors");
    form.hidden = false;
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      result.setAttribute("aria-busy", "true");
      explainText(input.value, form).then(function (answer) {
        show(result, answer.exceptions, answer.matches, errorsBase);
      }, function () {
        result.textContent = "";
        result.appendChild(el("p", {}, ["The patterns could not be loaded (" + (location.protocol === "file:" ? "the explain box needs the site served over HTTP" : "api/patterns.json is missing") + ")."]));
      }).then(function () {
        result.removeAttribute("aria-busy");
        result.setAttribute("data-done", "true");
      });
    });
  }

  window.errordbExplain = { parse: parse, translate: translate, sameFile: sameFile, literalWeight: literalWeight, ownClass: ownClass, cutMatch: cutMatch, movedFile: movedFile, raisedInAnotherPackage: raisedInAnotherPackage, reworded: reworded, score: score, rank: rank, rankAll: rankAll, round1: round1, explainText: explainText };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

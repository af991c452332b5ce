#!/usr/bin/env python3
"""Moves the bodies of a header's non-template namespace-scope `inline` functions into an implementation file.

Usage: tools/split_bodies.py include/volt/<area>/<name>.hpp [...]

For each function defined as `inline <signature> { <body> }` at namespace scope (column 0, not a template, not
constexpr/consteval, no deduced `auto` type), the header keeps the documentation and a declaration
`VOLT_INLINE <signature>;`, and `include/volt/<area>/impl/<name>.ipp` gets the definition
`VOLT_INLINE <signature without default arguments> { <body> }` in the same namespaces. The header includes
volt/core/linkage.hpp and, at its end, the .ipp when VOLT_DETAIL_HEADER_BODIES is 1 (header-only use, or the one
translation unit that compiles volt with VOLT_IMPLEMENTATION). Functions already split are left alone, so the
script can be run again after new functions are added. A maintenance tool: the build does not run it.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMESPACE_OPEN = re.compile(r"^namespace ([\w:]+) \{\s*$")
NAMESPACE_CLOSE = re.compile(r"^\}\s*// namespace ([\w:]+)\s*$")


def track_scope(line, namespaces):
    """Follows `namespace x {` / `}  // namespace x` in `namespaces`; returns +1 for an #if line, -1 for #endif."""
    if (m := NAMESPACE_OPEN.match(line)):
        namespaces.append(m.group(1))
    elif NAMESPACE_CLOSE.match(line):
        namespaces.pop()
    elif re.match(r"^\s*#\s*if", line):
        return 1
    elif re.match(r"^\s*#\s*endif", line):
        return -1
    return 0


def scan_code(text, start, stop_at_top_level_brace=False):
    """Yields (index, char) of code characters from `start`, skipping comments and string/char literals."""
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                return
            continue
        if text.startswith("/*", i):
            i = text.find("*/", i) + 2
            continue
        if c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i)
            delimiter = text[i + 2:open_paren]
            i = text.find(")" + delimiter + '"', open_paren) + len(delimiter) + 2
            continue
        if c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                i += 1
                continue
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        yield i, c
        i += 1


def matching(text, open_index):
    """The index of the bracket closing the one at `open_index`."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    opener = text[open_index]
    depth = 0
    for i, c in scan_code(text, open_index):
        if c == opener:
            depth += 1
        elif c == pairs[opener]:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced")


def split_top_level(params):
    parts, depth, current = [], 0, ""
    i = 0
    while i < len(params):
        c = params[i]
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
        i += 1
    if current.strip():
        parts.append(current)
    return parts


def strip_default(param):
    depth = 0
    for i, c in enumerate(param):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "=" and depth == 0 and param[i + 1:i + 2] != "=" and param[i - 1:i] not in ("=", "!", "<", ">"):
            return param[:i].rstrip()
    return param


CLASS_OPEN = re.compile(r"^(?:class|struct) (\w+)(?: final)?(?: : [^{]*)? \{\s*$")
BUILTIN_RETURN = re.compile(r"^(?:const )?(?:void|bool|int|unsigned|double|float|char|std::string|std::int64_t|"
                            r"std::size_t|std::uint32_t|std::uint64_t|torch::Tensor)[&*]?$")


def split_members(lines, _unused, moved):
    """Moves the multi-line member function bodies of non-template classes at namespace scope (column 0)."""
    out = []
    namespaces = []
    conditionals = 0
    index = 0
    current_class = None
    while index < len(lines):
        line = lines[index]
        conditionals += track_scope(line, namespaces)
        if (m := CLASS_OPEN.match(line)):
            previous = out[-1] if out else ""
            current_class = None if previous.startswith("template") else m.group(1)
        elif line.startswith("};"):
            current_class = None
        candidate = (current_class and namespaces and conditionals == 0 and line.startswith("  ")
                     and not line.startswith("   ") and not line.lstrip().startswith(("//", "template", "friend",
                     "using", "static constexpr", "constexpr", "consteval", "return", "}", "case", "public",
                     "private", "protected", "[[nodiscard]] constexpr", "static_assert", "enum", "struct",
                     "class", "#"))
                     and not (out and out[-1].lstrip().startswith("template")))
        if candidate:
            # The signature ends on the first line that ends with '{'; the body on the next "  }" line.
            end_signature = index
            while end_signature < len(lines) and not lines[end_signature].rstrip().endswith("{"):
                code = lines[end_signature].split("//")[0].rstrip().replace("{}", "")
                if code.endswith(";") or "{" in code or "}" in code or not code.strip():
                    end_signature = None
                    break
                end_signature += 1
            if end_signature is not None and end_signature < len(lines) and (
                    "//" in "".join(lines[index:end_signature + 1]) or
                    "{" in "".join(lines[index:end_signature + 1]).rstrip()[:-1].replace("{}", "")):
                end_signature = None  # a comment or a brace inside the signature: left as it is
            if end_signature is not None and end_signature < len(lines) and end_signature - index < 6:
                end_body = end_signature + 1
                while end_body < len(lines) and lines[end_body] != "  }\n":
                    if not (lines[end_body].startswith("    ") or lines[end_body].strip() == "" or
                            lines[end_body].startswith("#")):
                        end_body = None
                        break
                    end_body += 1
                signature = "".join(lines[index:end_signature + 1]).rstrip()[:-1].rstrip()
                if end_body is not None and end_body < len(lines) and "(" in signature and \
                        "operator" not in signature and not re.search(r"\bauto\b|\brequires\b|= *default|= *delete",
                                                                     signature):
                    member = member_parts(signature, current_class)
                    if member is not None:
                        declaration, definition_head = member
                        body = "".join(lines[end_signature + 1:end_body + 1])
                        body = "\n".join(l[2:] if l.startswith("  ") else l for l in body.split("\n"))
                        out.append(declaration)
                        moved.append(("::".join(namespaces), definition_head + " {\n" + body))
                        index = end_body + 1
                        continue
        out.append(line)
        index += 1
    return out


def wrap(head, limit=118):
    """Breaks a one-line signature after the commas of its parameter list, aligned after the '('."""
    first = head.split("\n")[0]
    rest = head[len(first):]
    if len(first) <= limit or "(" not in first:
        return head
    open_paren = first.index("(")
    pieces = split_top_level(first[open_paren + 1:first.rindex(")")])
    after = first[first.rindex(")"):]
    lines, current = [], first[:open_paren + 1]
    for k, piece in enumerate(pieces):
        piece = piece.strip() + ("," if k + 1 < len(pieces) else "")
        if len(current) + len(piece) + 1 > limit and not current.endswith("("):
            lines.append(current.rstrip())
            current = " " * (open_paren + 1)
        current += piece + " "
    lines.append(current.rstrip() + after)
    return "\n".join(lines) + rest


def member_parts(signature, class_name):
    """(declaration line(s), definition head) of a member function's in-class signature, or None."""
    text = signature.strip()
    # The parameter list: the first '(' outside template brackets.
    angle, open_paren = 0, None
    for i, c in enumerate(text):
        if c == "<":
            angle += 1
        elif c == ">":
            angle -= 1
        elif c == "(" and angle == 0:
            open_paren = i
            break
        elif c in "={;" and angle == 0:
            return None
    if open_paren is None:
        return None
    close_paren = matching(text, open_paren)
    before = text[:open_paren]
    params = text[open_paren + 1:close_paren]
    tail = text[close_paren + 1:]
    name_match = re.search(r"(~?\w+)\s*$", before)
    if not name_match:
        return None
    name = name_match.group(1)
    specifiers = before[:name_match.start()].strip()
    initializers = ""
    if (colon := tail.find(" : ")) >= 0 or tail.lstrip().startswith(":"):
        colon = tail.find(":")
        initializers = tail[colon:]
        tail = tail[:colon]
    tail = tail.strip()
    declaration_tail = tail
    definition_tail = re.sub(r"\b(override|final)\b", "", tail).strip()
    words = specifiers.split()
    # Attributes stay on the declaration; the definition repeats none ([[noreturn]] cannot follow `->`).
    kept = [w for w in words if w not in ("static", "virtual", "explicit", "inline") and not w.startswith("[[")]
    return_type = " ".join(kept)
    is_special = name == class_name or name == "~" + class_name
    if not is_special and not return_type:
        return None
    stripped = ", ".join(strip_default(p).strip() for p in split_top_level(params))
    stripped = re.sub(r"\s+", " ", stripped)
    qualified = f"{class_name}::{name}"
    if is_special:
        head = f"VOLT_INLINE {qualified}({stripped})"
    elif BUILTIN_RETURN.match(return_type):
        head = f"VOLT_INLINE {return_type} {qualified}({stripped})"
    else:
        head = f"VOLT_INLINE auto {qualified}({stripped})"
    if definition_tail:
        head += " " + definition_tail
    if not is_special and not BUILTIN_RETURN.match(return_type):
        head += f" -> {return_type}"
    if initializers:
        head += "\n    " + re.sub(r"\s+", " ", initializers.strip())
    indent = "  "
    declaration = indent + re.sub(r"\s+$", "", before.strip()) + "(" + params + ")"
    if declaration_tail:
        declaration += " " + declaration_tail
    declaration += ";\n"
    return declaration, wrap(head)


def process(header):
    path = ROOT / header
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    relative = path.relative_to(ROOT / "include").as_posix()
    impl_relative = str(pathlib.PurePosixPath(relative).parent / "impl" / (path.stem + ".ipp"))
    impl_path = ROOT / "include" / impl_relative

    # Character offset of each line start.
    offsets, total = [], 0
    for line in lines:
        offsets.append(total)
        total += len(line)

    namespaces = []
    conditionals = 0
    moved = []  # (namespace path, definition text)
    out = []
    index = 0
    while index < len(lines):
        line = lines[index]
        conditionals += track_scope(line, namespaces)
        previous = out[-1] if out else ""
        # Functions inside #if blocks stay: the .ipp is included outside them.
        attribute = ""
        if line.startswith("[[noreturn]] inline "):
            attribute, line = "[[noreturn]] ", line[len("[[noreturn]] "):]
        candidate = (line.startswith("inline ") and not re.match(r"inline (constexpr|consteval|auto)\b", line)
                     and not previous.lstrip().startswith("template") and namespaces and conditionals == 0)
        if candidate:
            start = offsets[index] + len(attribute)
            # The parameter list: the first '(' outside template brackets.
            angle, open_paren = 0, None
            for i, c in scan_code(text, start):
                if c == "<":
                    angle += 1
                elif c == ">":
                    angle -= 1
                elif c in "{;=" and angle == 0:
                    break
                elif c == "(" and angle == 0:
                    open_paren = i
                    break
            if open_paren is not None and "operator" not in text[start:open_paren]:
                close_paren = matching(text, open_paren)
                body_open = None
                for i, c in scan_code(text, close_paren + 1):
                    if c == "{":
                        body_open = i
                        break
                    if c == ";":
                        break
                params = text[open_paren + 1:close_paren]
                if body_open is not None and not re.search(r"\bauto\b", params) and \
                        "requires" not in text[close_paren:body_open]:
                    body_close = matching(text, body_open)
                    end_line = text.count("\n", 0, body_close)
                    rest = text[body_close + 1:offsets[end_line] + len(lines[end_line])]
                    if rest.strip() == "":
                        head = text[start + len("inline "):open_paren]
                        tail = text[close_paren + 1:body_open].rstrip()
                        # "VOLT_INLINE " is 5 characters longer than "inline ": continuation lines follow.
                        shift = lambda signature: signature.replace("\n", "\n     ")
                        declaration = attribute + "VOLT_INLINE " + shift(head + "(" + params + ")" + tail) + ";\n"
                        stripped = ",".join(strip_default(p) for p in split_top_level(params))
                        definition = (attribute + "VOLT_INLINE " + shift(head + "(" + stripped + ")" + tail) + " " +
                                      text[body_open:body_close + 1] + "\n")
                        if "::" not in re.sub(r"<[^<>]*>", "", head).split()[-1]:
                            out.append(declaration)
                        # else: a member defined outside its class; its declaration is in the class.
                        moved.append(("::".join(namespaces), definition))
                        index = end_line + 1
                        continue
        out.append(lines[index])
        index += 1

    out = split_members(out, namespaces_at := [], moved)
    if not moved:
        print(f"{header}: nothing to move")
        return
    result = "".join(out)
    # Forward declarations of moved functions take their linkage (an `inline` one would expect a definition here).
    for _, definition in moved:
        name = re.search(r"(\w+)\(", definition.split("{")[0]).group(1)
        result = re.sub(r"^inline ((?!constexpr|consteval)[^{;]*\b" + name + r"\([^{;]*\)[^{;]*;)",
                        r"VOLT_INLINE \1", result, flags=re.M)
    if "#include <volt/core/linkage.hpp>" not in result:
        # After the first block of volt includes, or before the first include.
        match = re.search(r"^#include <volt/[^>]+>\n", result, re.M)
        insert_at = match.start() if match else re.search(r"^#include ", result, re.M).start()
        result = result[:insert_at] + "#include <volt/core/linkage.hpp>\n" + result[insert_at:]
    include_line = f"#include <{impl_relative}>"
    if include_line not in result:
        result = result.rstrip("\n") + f"\n\n#if VOLT_DETAIL_HEADER_BODIES\n{include_line}\n#endif\n"
    path.write_text(result)

    existing = impl_path.read_text() if impl_path.exists() else (
        f"/// \\file\n/// Definitions of the functions declared in volt/{relative[len('volt/'):]}: compiled in every "
        "translation unit\n/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).\n"
        "#pragma once\n")
    body = existing.rstrip("\n") + "\n"
    current = None
    for namespace, definition in moved:
        if namespace != current:
            if current is not None:
                body += f"}}  // namespace {current}\n"
            body += f"\nnamespace {namespace} {{\n\n"
            current = namespace
        else:
            body += "\n"
        body += definition
    body += f"\n}}  // namespace {current}\n"
    impl_path.parent.mkdir(parents=True, exist_ok=True)
    impl_path.write_text(body)
    print(f"{header}: {len(moved)} function(s) moved to include/{impl_relative}")


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        process(argument)

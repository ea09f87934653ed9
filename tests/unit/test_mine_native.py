"""The native reader: torch's C++ checks and the Rust messages of pyo3 bindings.

The snippets are written for these tests; where a test checks a message against the real
library, the snippet holds only the message's wording (a fact) in the form the library's source
uses, and the real library raises the message it is matched against.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import regex

from errkb.mine import mine
from errkb.mine._native import native_sites
from errkb.mine._site import Hole, Site, Template
from errkb.mine._template import message_pattern


def _sites(path: str, source: str, distribution: str = "torch") -> list[Site]:
    return list(
        native_sites([(path, textwrap.dedent(source))], distribution=distribution, version="1.0")
    )


def _one(path: str, source: str, distribution: str = "torch") -> Site:
    [site] = _sites(path, source, distribution)
    return site


def _pattern(template: Template) -> regex.Pattern[str]:
    """The record's messagePattern for the template, compiled as the matcher compiles it."""
    return regex.compile(message_pattern(template))


# --- C++ -----------------------------------------------------------------------------------


def test_a_multi_line_check_joins_literals_and_holes():
    """Adjacent literals concatenate, escapes decode, expressions become holes, line = macro's."""
    site = _one(
        "aten/src/ATen/native/Linear.cpp",
        """\
        namespace at::native {
        Tensor linear(const Tensor& input, const Tensor& weight) {
          TORCH_CHECK(
              input.dim() >= 1,  // a comment, with "quotes" and (parens)
              "linear: expected input of at least 1 dim, "
              "got \\"", input.dim(), "\\" dims\\n",
              /* size */ weight.sizes());
          return input;
        }
        }
        """,
    )
    assert (
        'linear: expected input of at least 1 dim, got "',
        Hole("input.dim()"),
        '" dims\n',
        Hole("weight.sizes()"),
    ) == site.template
    assert ("RuntimeError", 3, "input.dim() < 1") == (
        site.error_class,
        site.line,
        site.condition,
    )
    assert ("native", "c++", "linear") == (site.kind, site.language, site.function)


@pytest.mark.parametrize(
    ("call", "error_class"),
    [
        ('TORCH_CHECK(ok, "broken thing")', "RuntimeError"),
        ('TORCH_CHECK_VALUE(ok, "broken thing")', "ValueError"),
        ('TORCH_CHECK_INDEX(ok, "broken thing")', "IndexError"),
        ('TORCH_CHECK_TYPE(ok, "broken thing")', "TypeError"),
        ('TORCH_CHECK_NOT_IMPLEMENTED(ok, "broken thing")', "NotImplementedError"),
        ('TORCH_CHECK_LINALG(ok, "broken thing")', "torch._C._LinAlgError"),
        ('TORCH_CHECK_BUFFER(ok, "broken thing")', "BufferError"),
        ('TORCH_CHECK_ALWAYS_SHOW_CPP_STACKTRACE(ok, "broken thing")', "RuntimeError"),
        ('TORCH_CHECK_WITH(ValueError, ok, "broken thing")', "ValueError"),
        ('TORCH_CHECK_WITH(c10::OutOfMemoryError, ok, "broken thing")', "torch.OutOfMemoryError"),
        ('TORCH_CHECK_WITH(CuDNNError, ok, "broken thing")', "RuntimeError"),
    ],
)
def test_each_check_macro_raises_the_class_python_sees(call, error_class):
    """The macro (or TORCH_CHECK_WITH's type) decides the Python class; the message is the same."""
    site = _one("c10/util/x.h", f"void f(bool ok) {{\n  {call};\n}}\n")
    assert (("broken thing",), error_class, "not ok") == (
        site.template,
        site.error_class,
        site.condition,
    )


@pytest.mark.parametrize(
    ("cond", "condition"),
    [
        ("input_size.size() == 2", "input_size.size() != 2"),
        ("a != b", "a == b"),
        ("n < limit", "n >= limit"),
        ("n <= limit", "n > limit"),
        ("n > 0", "n <= 0"),
        ("n >= 0", "n < 0"),
        ("(k < n)", "k >= n"),
        ("ptr->size() >= 1", "ptr->size() < 1"),
        ("(int)x == 3", "(int)x != 3"),
        ('mode == "a<b"', 'mode != "a<b"'),
        ("t.is_cuda()", "not t.is_cuda()"),
        ("t.sizes()[0]", "not t.sizes()[0]"),
        ("!t.is_cuda()", "t.is_cuda()"),
        ("!(a && b)", "a && b"),
        ("a && b", "not (a && b)"),
        ("x > 0 || y > 0", "not (x > 0 || y > 0)"),
        ("0 <= i < n", "not (0 <= i < n)"),
        ("n % 2", "not (n % 2)"),
        ("flags & 1 == 0", "not (flags & 1 == 0)"),
        ("static_cast<int>(x) == y", "not (static_cast<int>(x) == y)"),
    ],
)
def test_a_check_states_the_condition_under_which_it_raises(cond, condition):
    """TORCH_CHECK(cond) raises when cond is false: the site's condition is cond turned round."""
    site = _one("a.cpp", f'void f() {{\n  TORCH_CHECK({cond}, "the check failed here");\n}}\n')
    assert condition == site.condition


def test_an_internal_assert_states_the_condition_under_which_it_raises():
    """TORCH_INTERNAL_ASSERT(n == 2, ...) raises when n != 2; its message quotes n == 2."""
    site = _one("a.cpp", 'void f(int n) {\n  TORCH_INTERNAL_ASSERT(n == 2, "n is ", n);\n}\n')
    assert "n != 2" == site.condition


def test_std_torch_check_is_read_with_the_location_it_puts_first():
    """STD_TORCH_CHECK's text starts with __func__, __FILE__:__LINE__; it is a RuntimeError."""
    site = _one(
        "csrc/libtorch_stable/ops.cu",
        """\
        void rms_norm(Tensor& out, const Tensor& input) {
          STD_TORCH_CHECK(input.is_contiguous(), "input must be contiguous, got ", input.dim());
          STD_TORCH_CHECK(out.dim() == 2);
        }
        """,
        "vllm",
    )
    assert (
        Hole("__func__"),
        ", ",
        Hole("__FILE__"),
        ":",
        Hole("__LINE__", number=True),
        ", input must be contiguous, got ",
        Hole("input.dim()"),
    ) == site.template
    assert ("RuntimeError", "not input.is_contiguous()", "rms_norm") == (
        site.error_class,
        site.condition,
        site.function,
    )
    raised = "rms_norm, /src/csrc/libtorch_stable/ops.cu:2, input must be contiguous, got 3"
    assert _pattern(site.template).fullmatch(raised)


@pytest.mark.parametrize(
    ("macro", "asserted", "condition"),
    [
        ("TORCH_CHECK_EQ", "==", "x.dim() != limit"),
        ("TORCH_CHECK_NE", "!=", "x.dim() == limit"),
        ("TORCH_CHECK_LT", "<", "x.dim() >= limit"),
        ("TORCH_CHECK_LE", "<=", "x.dim() > limit"),
        ("TORCH_CHECK_GT", ">", "x.dim() <= limit"),
        ("TORCH_CHECK_GE", ">=", "x.dim() < limit"),
    ],
)
def test_comparison_checks_say_check_failed_with_both_values(macro, asserted, condition):
    """TORCH_CHECK_EQ(a, b) and kin: "Check failed: a == b (1 vs. 2)", raised when a != b."""
    site = _one("a.cpp", f"void f(const Tensor& x, int limit) {{\n  {macro}(x.dim(), limit);\n}}\n")
    assert (
        f"Check failed: x.dim() {asserted} limit (",
        Hole("x.dim()"),
        " vs. ",
        Hole("limit"),
        ")",
    ) == site.template
    assert ("RuntimeError", condition) == (site.error_class, site.condition)
    # c10 prefixes its log header; releases end the text with ") " or "). ".
    raised = (
        f"[F1201 18:50:19.123456789 a.cpp:2] Check failed: x.dim() {asserted} limit (3 vs. 2). "
    )
    match = _pattern(site.template).search(raised)
    assert match is not None
    assert ("3", "2") == match.groups()


def test_a_comparison_checks_loose_operands_are_parenthesised_in_its_condition():
    """TORCH_CHECK_EQ(flags & 1, 0) raises when (flags & 1) != 0, not flags & 1 != 0."""
    site = _one("a.cpp", "void f(int flags) {\n  TORCH_CHECK_EQ(flags & 1, 0);\n}\n")
    assert "(flags & 1) != 0" == site.condition


def test_an_error_inside_an_if_is_raised_when_the_if_holds():
    """if (c) { TORCH_CHECK(false, ...) } is raised when c; a check inside adds its failure."""
    sites = _sites(
        "a.cpp",
        """\
        Tensor f(const Tensor& t, int dtype) {
          if (dtype == kFloat) {
            TORCH_CHECK(t.dim() == 2, "float tensors must be two-dimensional");
          } else if (dtype == kHalf || dtype == kBFloat16) {
            for (int i = 0; i < 3; i++) {
              TORCH_CHECK(false, "half tensors are not supported here");
            }
          } else {
            AT_ERROR("unsupported dtype for this op: ", dtype);
          }
          if (!t.is_cuda()) AT_ERROR("the tensor must live on a CUDA device");
          if (auto n = t.numel(); n > 10)
            TORCH_CHECK(false, "too many elements in the tensor");
          switch (dtype) {
            case 1: {
              TORCH_CHECK(false, "case one of the switch statement");
            }
          }
        }
        """,
    )
    assert [
        "dtype == kFloat and t.dim() != 2",
        "dtype != kFloat and (dtype == kHalf || dtype == kBFloat16)",
        "dtype != kFloat and not (dtype == kHalf || dtype == kBFloat16)",
        "!t.is_cuda()",
        "n > 10",
        None,
    ] == [s.condition for s in sites]


def test_guards_stop_at_a_lambda_and_at_an_else_they_cannot_pair():
    """An if outside a lambda is not the lambda's guard; an else after a braceless if is unread."""
    sites = _sites(
        "a.cpp",
        """\
        void f(int n) {
          if (n > 1) {
            auto g = [&](int m) {
              if (m) { TORCH_CHECK(false, "inside a lambda, guarded by m"); }
            };
          }
          if (n == 2) n = 3;
          else TORCH_CHECK(false, "after a braceless if, the else");
        }
        """,
    )
    assert ["m", None] == [s.condition for s in sites]


def test_a_long_else_if_chain_is_followed_without_recursion():
    """Two thousand else-ifs (past the recursion limit) still give the final else's condition."""
    chain = "".join(f"  }} else if (k == {i}) {{\n    n = {i};\n" for i in range(2000))
    source = f'void f(int k) {{\n  if (k < 0) {{\n{chain}  }} else {{\n    AT_ERROR("no case for k");\n  }}\n}}\n'
    site = _one("a.cpp", source)
    assert site.condition is not None
    assert site.condition.startswith("k >= 0 and k != 0 and k != 1 and ")
    assert site.condition.endswith("and k != 1999")


def test_a_rust_error_inside_an_if_is_raised_when_the_if_holds():
    """if c { return Err(...) } is raised when c, its else when not c; if let adds nothing."""
    sites = _sites(
        "src/lib.rs",
        """\
        impl Open {
            fn new(size: usize, kind: Option<u8>) -> PyResult<Self> {
                if size > 10 {
                    return Err(PyValueError::new_err("the size is too large for us"));
                } else if let Some(k) = kind {
                    return Err(PyValueError::new_err("a kind was given, not allowed"));
                } else {
                    return Err(PyValueError::new_err("no kind was given at all"));
                }
            }
        }
        """,
        "pkg",
    )
    assert ["size > 10", "size <= 10", "size <= 10"] == [s.condition for s in sites]


def test_the_records_sentence_says_when_a_check_fails(tmp_path):
    """The mined record of TORCH_CHECK(a == b, ...) reads "Raised by f when a != b."."""
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "bilinear.cpp").write_text(
        "Tensor bilinear(const Tensor& input, IntArrayRef input_size) {\n"
        '  TORCH_CHECK(input_size.size() == 2, "scores must be a 2D Tensor of sizes");\n'
        "}\n"
    )
    [record] = mine([str(tmp_path)]).records
    assert "Raised by bilinear when input_size.size() != 2." == record["documentation"]


def test_a_check_without_a_message_quotes_its_condition_as_c10_does():
    """No message: c10's default text with the condition on one line, as ``#cond`` writes it."""
    site = _one("a.cpp", "void f(int n) {\n  TORCH_CHECK(n >\n      0);\n}\n")
    expected = (
        "Expected n > 0 to be true, but got false.  (Could this error message be improved?  "
        "If so, please report an enhancement request to PyTorch.)"
    )
    assert (expected,) == site.template


def test_an_unconditional_error_has_no_condition():
    """AT_ERROR and TORCH_CHECK(false, ...) raise always: no condition."""
    sites = _sites(
        "a.cpp",
        'void f(int k) {\n  AT_ERROR("bad kind ", k);\n  TORCH_CHECK(false, "never ", k);\n}\n',
    )
    assert [("bad kind ", Hole("k")), ("never ", Hole("k"))] == [s.template for s in sites]
    assert [None, None] == [s.condition for s in sites]


def test_an_internal_assert_starts_with_its_condition_and_the_build_location():
    """TORCH_INTERNAL_ASSERT: condition, INTERNAL ASSERT FAILED at "file":line, then the message."""
    site = _one("a.cpp", 'void f(int n) {\n  TORCH_INTERNAL_ASSERT(n == 2, "n is ", n);\n}\n')
    assert (
        'n == 2 INTERNAL ASSERT FAILED at "',
        Hole("__FILE__"),
        '":',
        Hole("__LINE__", number=True),
        ", please report a bug to PyTorch. n is ",
        Hole("n"),
    ) == site.template
    pattern = _pattern(site.template)
    assert pattern.fullmatch(
        'n == 2 INTERNAL ASSERT FAILED at "/build/aten/a.cpp":2, please report a bug to '
        "PyTorch. n is 3"
    )


def test_nested_brackets_templates_and_c10_str_stay_inside_their_argument():
    """Commas in calls, template arguments and braces do not split arguments; c10::str flattens."""
    site = _one(
        "a.cpp",
        """\
        void f(const Tensor& t) {
          TORCH_CHECK(std::get<0>(std::pair<int, int>{1, 2}) < t.size(0) && t.sizes()[0] > 1,
                      "sizes ", at::IntArrayRef({t.size(0), t.size(1)}), ", char ')' and ",
                      c10::str("inner ", 7, t.dim()), R"(raw "text")");
        }
        """,
    )
    assert (
        "not (std::get<0>(std::pair<int, int>{1, 2}) < t.size(0) && t.sizes()[0] > 1)"
        == site.condition
    )
    assert (
        "sizes ",
        Hole("at::IntArrayRef({t.size(0), t.size(1)})"),
        ", char ')' and inner 7",
        Hole("t.dim()"),
        'raw "text"',
    ) == site.template


def test_macro_names_in_comments_strings_and_definitions_are_not_sites():
    """Comments and strings hold no checks; a macro's own definition and wrappers are skipped."""
    sites = _sites(
        "a.h",
        """\
        // TORCH_CHECK(false, "in a comment");
        /* AT_ERROR("in a block comment"); */
        const char* s = "TORCH_CHECK(false, \\"in a string\\")";
        #define TORCH_CHECK_VALUE(cond, ...) TORCH_CHECK_WITH(ValueError, cond, __VA_ARGS__)
        #define MY_CHECK(cond, ...) TORCH_CHECK(cond, "mine: ", __VA_ARGS__)
        void f() { TORCH_CHECK(false, "the only one"); }
        """,
    )
    assert [("the only one",)] == [s.template for s in sites]


def test_the_enclosing_function_is_named_through_classes_and_lambdas():
    """Member functions get their class; lambdas and blocks are looked through."""
    sites = _sites(
        "a.cpp",
        """\
        namespace c10 {
        struct Widget : public Base {
          void run(int n) const {
            if (n) {
              auto g = [&](int m) { TORCH_CHECK(m, "in a lambda"); };
            }
          }
        };
        int64_t Widget::size(int64_t d) {
          TORCH_CHECK(d, "out of line");
        }
        TORCH_IMPL_FUNC(addmv_out)(const Tensor& self) {
          TORCH_CHECK(self.defined(), "structured kernel");
        }
        }
        TORCH_CHECK(false, "at file scope");
        """,
    )
    assert ["Widget::run", "Widget::size", "addmv_out", None] == [s.function for s in sites]


def test_checks_in_a_macro_body_read_through_line_splices_and_stringized_parameters():
    """A check inside a #define: backslash-newlines are spaces, ``#PARAM`` is a hole."""
    site = _one(
        "a.h",
        """\
        #define CHECK_CUDA(TENSOR)                     \\
          TORCH_CHECK(TENSOR.is_cuda(),                \\
                      #TENSOR " must be a CUDA tensor, " \\
                      "got ", TENSOR.device())
        """,
    )
    assert (Hole("#TENSOR"), " must be a CUDA tensor, got ", Hole("TENSOR.device()")) == (
        site.template
    )
    assert ("not TENSOR.is_cuda()", 2, None) == (site.condition, site.line, site.function)


def test_functions_with_braced_defaults_operators_and_template_defaults_are_named():
    """Braces in a default argument, operator<< and template parameter defaults keep the name."""
    sites = _sites(
        "a.h",
        """\
        struct Backend {
          virtual Tensor allocate(long size, TensorOptions options = {}) {
            TORCH_CHECK(false, "allocate is not supported");
          }
        };
        inline std::ostream& operator<<(std::ostream& stream, Layout layout) {
          TORCH_CHECK(false, "Unknown layout");
        }
        template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
        bool equal(T num) const {
          TORCH_CHECK(false, "not an integer");
        }
        """,
    )
    assert ["Backend::allocate", "operator<<", "equal"] == [s.function for s in sites]


def test_the_matmul_shape_check_matches_what_torch_raises():
    """The upstream wording of the mm shape check matches ``torch.ones(2, 3) @ torch.ones(2, 3)``.

    The wording is torch's (aten/src/ATen/native/LinearAlgebra.cpp, the mm and addmm checks),
    the snippet around it is ours.
    """
    torch = pytest.importorskip("torch")
    site = _one(
        "aten/src/ATen/native/LinearAlgebra.cpp",
        """\
        static void addmm_impl_cpu_(Tensor& result, const Tensor& m1, const Tensor& m2) {
          TORCH_CHECK(
              m1.sizes()[1] == m2.sizes()[0], "mat1 and mat2 shapes cannot be multiplied (",
              m1.sizes()[0], "x", m1.sizes()[1], " and ", m2.sizes()[0], "x", m2.sizes()[1], ")");
        }
        """,
    )
    with pytest.raises(RuntimeError) as raised:
        torch.ones(2, 3) @ torch.ones(2, 3)
    match = _pattern(site.template).fullmatch(str(raised.value))
    assert match is not None
    assert ("2", "3", "2", "3") == match.groups()


def test_the_excerpt_holds_ten_lines_either_side_or_as_many_as_asked():
    """The excerpt starts ten lines (or ``excerpt_lines``) above the macro and ends as far below."""
    lines = [f"// line {n}" for n in range(1, 41)]
    lines[19] = 'TORCH_CHECK(false, "line twenty");'
    site = _one("a.cpp", "\n".join(lines) + "\n")
    assert (20, 10) == (site.line, site.excerpt_start)
    assert lines[9:30] == site.excerpt.splitlines()
    files = [("a.cpp", "\n".join(lines))]
    [short] = native_sites(files, distribution="torch", version="1", excerpt_lines=2)
    assert (18, lines[17:22]) == (short.excerpt_start, short.excerpt.splitlines())


@pytest.mark.parametrize(
    "path",
    [
        "aten/src/ATen/test/a.cpp",
        "csrc/tests/kernels/a.cu",
        "benchmarks/kernels/a.cu",
        "benches/a.rs",
        "tests/lib.rs",
        "src/io_test.cc",
        "src/test_ops.cpp",
        "src/parser_test.rs",
        "tools/a.py",
    ],
)
def test_tests_benchmarks_and_other_languages_are_passed_over(path):
    """Files under tests/ or benchmarks/, test_* and *_test files, and other languages."""
    check = 'void f() { TORCH_CHECK(false, "a message"); }\n'
    panic = 'fn f() { panic!("a message here"); }\n'
    text = panic if path.endswith(".rs") else check
    files = [(path, text), ("src/a.cc", check), ("src/a.rs", panic)]
    sites = list(native_sites(files, distribution="torch", version="1"))
    assert ["src/a.cc", "src/a.rs"] == [s.path for s in sites]


def test_a_real_check_in_the_installed_torch_headers_matches_what_torch_raises():
    """The IndexError check of the shipped ATen/TensorIndexing.h matches ``torch.ones(3)[5]``."""
    torch = pytest.importorskip("torch")
    header = Path(torch.__file__).parent / "include" / "ATen" / "TensorIndexing.h"
    sites = _sites("ATen/TensorIndexing.h", header.read_text())
    [site] = [s for s in sites if s.error_class == "IndexError" and "out of bounds" in str(s)]
    with pytest.raises(IndexError) as raised:
        torch.ones(3)[5]
    assert _pattern(site.template).fullmatch(str(raised.value))


# --- Rust ----------------------------------------------------------------------------------


def test_new_err_with_format_fills_positional_named_and_captured_holes():
    """format!: {} takes the next argument, {0} by index, {name} by name or captured variable."""
    site = _one(
        "bindings/python/src/lib.rs",
        """\
        impl Open {
            fn new(filename: &str, size: usize) -> PyResult<Self> {
                Err(exceptions::PyValueError::new_err(format!(
                    "File {filename:?} has {} bytes, {0} again, {w} wide, \\
                     {{braces}} \\"q\\" {:.2}\\t",
                    size,
                    1.5,
                    w = size * 2,
                )))
            }
        }
        """,
    )
    assert (
        "File ",
        Hole("filename"),
        " has ",
        Hole("size"),
        " bytes, ",
        Hole("size"),
        " again, ",
        Hole("size * 2"),
        ' wide, {braces} "q" ',
        Hole("1.5", number=True),
        "\t",
    ) == site.template
    assert ("ValueError", 3, "Open::new", "rust") == (
        site.error_class,
        site.line,
        site.function,
        site.language,
    )


@pytest.mark.parametrize(
    ("call", "error_class"),
    [
        ('PyTypeError::new_err("a message")', "TypeError"),
        ('exceptions::PyException::new_err("a message".to_string())', "Exception"),
        ('pyo3::exceptions::PyRuntimeError::new_err(String::from("a message"))', "RuntimeError"),
        ('PyIOError::new_err("a message")', "OSError"),
        ('PyErr::new::<exceptions::PyIndexError, _>("a message")', "IndexError"),
        ('PyError(r#"a message"#.into()).into_pyerr::<exceptions::PyValueError>()', "ValueError"),
        ('MyError::new_err("a message")', "MyError"),
    ],
)
def test_each_pyo3_form_raises_the_class_python_sees(call, error_class):
    """pyo3's Py* classes are the builtins (PyIOError is OSError); others keep their name."""
    site = _one("src/lib.rs", f"fn f() -> PyResult<()> {{\n    Err({call})\n}}\n", "pkg")
    assert (("a message",), error_class) == (site.template, site.error_class)


def test_a_class_made_by_create_exception_is_named_by_its_module():
    """create_exception!(module, Name, ...) in one file names the class used in another."""
    files = [
        ("src/lib.rs", 'fn f() { Err(SafetensorError::new_err("File is closed")) }\n'),
        ("src/error.rs", "pyo3::create_exception!(\n    safetensors_rust,\n    SafetensorError,"),
    ]
    [site] = native_sites(files, distribution="safetensors", version="1")
    assert "safetensors_rust.SafetensorError" == site.error_class


def test_thiserror_messages_keep_fields_and_take_the_wrapper_class():
    """#[error] holes stay as written ({0}, {name}); tokenizers' wrapper raises Exception."""
    source = """\
        #[derive(thiserror::Error, Debug)]
        pub enum Error {
            #[error("Unk token `{0}` not found in the vocabulary")]
            UnkTokenOutOfVocabulary(String),
            #[error("Merges text file invalid at line {line}: {source:?}")]
            BadMerges { line: usize, source: io::Error },
            #[error(transparent)]
            Other(#[from] io::Error),
        }
        """
    sites = _sites("tokenizers/src/models/bpe/mod.rs", source, "tokenizers")
    assert [
        ("Unk token `", Hole("0"), "` not found in the vocabulary"),
        ("Merges text file invalid at line ", Hole("line"), ": ", Hole("source")),
    ] == [s.template for s in sites]
    assert [("Exception", 3), ("Exception", 5)] == [(s.error_class, s.line) for s in sites]
    assert [None, None] == [s.error_class for s in _sites("src/e.rs", source, "other")]


def test_boxed_errors_and_panics():
    """Err("...".into()) in a wrapped crate raises Exception; panic! raises PanicException."""
    source = """\
        fn train(&self) -> Result<()> {
            if self.bad { return Err("BpeTrainer can only train a BPE".into()); }
            if self.worse { return Err(format!("bad size {}", self.size).into()); }
            panic!("likelihood is NAN, size {}", self.size);
        }
        """
    sites = _sites("tokenizers/src/models/mod.rs", source, "tokenizers")
    assert [
        (("BpeTrainer can only train a BPE",), "Exception"),
        (("bad size ", Hole("self.size")), "Exception"),
        (("likelihood is NAN, size ", Hole("self.size")), "pyo3_runtime.PanicException"),
    ] == [(s.template, s.error_class) for s in sites]
    assert ["pyo3_runtime.PanicException"] == [
        s.error_class for s in _sites("src/m.rs", source, "other")
    ]


def test_rust_tests_function_references_and_lifetimes_give_no_sites():
    """#[cfg(test)] modules, map_err(PyValueError::new_err) and lifetimes are not messages."""
    sites = _sites(
        "src/lib.rs",
        """\
        fn parse<'a>(s: &'a str) -> PyResult<Version> {
            let c = '(';
            Version::from_string(s).map_err(PyValueError::new_err)?;
            Err(PyValueError::new_err(r"kept: a \\n stays"))
        }
        #[cfg(test)]
        mod tests {
            fn t() { Err(PyValueError::new_err("in a test")) }
        }
        """,
        "pkg",
    )
    assert [(r"kept: a \n stays",)] == [s.template for s in sites]
    assert ["parse"] == [s.function for s in sites]


@pytest.mark.parametrize(
    "item",
    [
        '#[cfg(test)]\nmod tests {\n    fn t() { panic!("in a test module"); }\n}',
        '#[cfg(test)]\n#[allow(dead_code)]\npub(crate) mod tests {\n    fn t() { panic!("x"); }\n}',
        '#[test]\nfn reads_a_file() {\n    panic!("in a test function");\n}',
        '#[tokio::test]\nasync fn serves() {\n    panic!("in an async test");\n}',
        '#[cfg(test)]\nfn helper() -> [u8; 2] {\n    panic!("in a test helper");\n}',
        '#[cfg(test)]\nimpl Model {\n    fn fake() { panic!("in a test impl"); }\n}',
        '#[cfg(all(test, feature = "http"))]\nfn t() {\n    panic!("in a test");\n}',
    ],
)
def test_test_only_rust_items_give_no_sites(item):
    """Items behind #[cfg(test)] (modules, functions, impls) and #[test] functions are left out."""
    source = f'{item}\nfn kept() {{\n    panic!("the only message users meet");\n}}\n'
    sites = _sites("src/lib.rs", source, "pkg")
    assert [("the only message users meet",)] == [s.template for s in sites]


def test_rust_items_for_users_builds_are_kept():
    """#[cfg(not(test))] and #[cfg(any(test, ...))] items are in users' builds: kept."""
    source = """\
        #[cfg(not(test))]
        fn a() { panic!("built for users, first"); }
        #[cfg(any(test, feature = "x"))]
        fn b() { panic!("built for users, second"); }
        """
    assert ["a", "b"] == [s.function for s in _sites("src/lib.rs", source, "pkg")]


def test_a_file_marked_test_only_or_declared_as_a_test_module_gives_no_sites():
    """#![cfg(test)] files, and the file of #[cfg(test)] mod name;, are left out whole."""
    panic = 'fn f() { panic!("a message in this file"); }\n'
    files = [
        ("src/lib.rs", "#[cfg(test)]\nmod unit;\nmod kept;\n"),
        ("src/unit.rs", panic),
        ("src/kept.rs", panic),
        ("src/models/mod.rs", "#[cfg(test)]\nmod checks;\n"),
        ("src/models/checks/mod.rs", panic),
        ("src/models/bpe.rs", "#[cfg(test)]\nmod cases;\n" + panic),
        ("src/models/bpe/cases.rs", panic),
        ("src/inner.rs", "#![cfg(test)]\n" + panic),
    ]
    sites = native_sites(files, distribution="pkg", version="1")
    assert ["src/kept.rs", "src/models/bpe.rs"] == [s.path for s in sites]


def test_real_tokenizers_and_safetensors_messages_match_their_templates(tmp_path):
    """Templates from snippets in the sources' forms match what the installed libraries raise."""
    tokenizers = pytest.importorskip("tokenizers")
    safetensors = pytest.importorskip("safetensors")
    # tokenizers/src/utils/truncation.rs (thiserror), bindings/python/src/tokenizer.rs
    # (PyValueError::new_err(format!(...))) and safetensors' bindings/python/src/lib.rs.
    truncation, strategy = _sites(
        "tokenizers/src/utils/truncation.rs",
        """\
        #[error("Truncation error: Second sequence not provided")]
        SecondSequenceNotProvided,
        fn enable_truncation(value: &str) -> PyResult<()> {
            Err(exceptions::PyValueError::new_err(format!(
                "Unknown `strategy`: `{}`. Use \\
                one of `longest_first`, `only_first`, or `only_second`",
                value
            )))
        }
        """,
        "tokenizers",
    )
    header = _one(
        "bindings/python/src/lib.rs",
        'fn open() { Err(SafetensorError::new_err(format!("Error while deserializing header: '
        '{e:?}"))) }',
        "safetensors",
    )
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0, "[UNK]": 1}, "[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.enable_truncation(max_length=1, strategy="only_second")
    with pytest.raises(Exception) as second:  # tokenizers raises Exception itself
        tok.encode("a a a")
    with pytest.raises(ValueError) as unknown:
        tok.enable_truncation(max_length=1, strategy="bogus")
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\xff" * 16)
    with pytest.raises(safetensors.SafetensorError) as bad_header:
        safetensors.safe_open(garbage, "pt")
    for site, raised in [(truncation, second), (strategy, unknown), (header, bad_header)]:
        assert site.error_class.rpartition(".")[2] == type(raised.value).__name__
        assert _pattern(site.template).fullmatch(str(raised.value)), str(raised.value)


def test_a_rust_file_keeps_its_crate_path():
    """Two crates' src/lib.rs are two files: a native site's path is its path in the source."""
    from errkb.mine._write import package_path

    assert "bindings/python/src/lib.rs" == package_path("bindings/python/src/lib.rs")
    assert "safetensors/src/lib.rs" == package_path("safetensors/src/lib.rs")
    assert "transformers/x.py" == package_path("src/transformers/x.py")

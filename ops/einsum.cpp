#include "ops/einsum.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/error.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace kiln {

namespace {

// Uppercase letters are free for ellipsis dims only when the equation uses
// none; kiln names ellipsis dims with characters outside [a-zA-Z].
constexpr char kEllipsisBase = '0';

// One operand with one label per dim.
struct Term {
  Tensor t;
  std::string labels;
};

std::string expand_ellipsis(const std::string& spec, int64_t ndim, int64_t ell_dims,
                            const std::string& equation) {
  auto pos = spec.find("...");
  if (pos == std::string::npos) {
    KILN_CHECK(static_cast<int64_t>(spec.size()) == ndim, Runtime, "[einsum] the number of "
               "subscripts in '", spec, "' does not match the number of dimensions (", ndim,
               ") of its operand in '", equation, "'");
    return spec;
  }
  int64_t named = static_cast<int64_t>(spec.size()) - 3;
  int64_t here = ndim - named;
  KILN_CHECK(here >= 0, Runtime, "[einsum] operand has ", ndim, " dims but '", spec,
             "' names more in '", equation, "'");
  std::string ell;
  for (int64_t i = ell_dims - here; i < ell_dims; ++i) ell += static_cast<char>(kEllipsisBase + i);
  return spec.substr(0, pos) + ell + spec.substr(pos + 3);
}

// Sums away labels of `term` that appear in no other operand and not in the output.
Term sum_private(Term term, const std::string& keep) {
  std::vector<int64_t> dims;
  std::string labels;
  for (size_t i = 0; i < term.labels.size(); ++i) {
    if (keep.find(term.labels[i]) == std::string::npos) dims.push_back(static_cast<int64_t>(i));
    else labels += term.labels[i];
  }
  if (dims.empty()) return term;
  return {sum(term.t, dims, false), labels};
}

// Contracts two terms, keeping the labels in `keep`, via one bmm.
Term contract(const Term& a, const Term& b, const std::string& keep) {
  std::string batch, left, right, inner;
  for (char c : a.labels) {
    bool in_b = b.labels.find(c) != std::string::npos;
    bool kept = keep.find(c) != std::string::npos;
    if (in_b && kept) batch += c;
    else if (in_b) inner += c;
    else left += c;
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos) right += c;
  std::map<char, int64_t> size;
  auto note = [&size](const Term& t) {
    for (size_t i = 0; i < t.labels.size(); ++i) {
      int64_t s = t.t.sizes()[i];
      auto it = size.find(t.labels[i]);
      if (it == size.end() || it->second == 1) size[t.labels[i]] = s;
      else KILN_CHECK(s == 1 || s == it->second, Runtime, "[einsum] subscript '", t.labels[i],
                      "' has size ", s, " in one operand and ", it->second, " in another");
    }
  };
  note(a);
  note(b);
  auto arrange = [&size](const Term& t, const std::string& order) {
    std::vector<int64_t> perm;
    Shape target;
    for (char c : order) {
      perm.push_back(static_cast<int64_t>(t.labels.find(c)));
      target.push_back(size[c]);
    }
    return expand(permute(t.t, perm), target);
  };
  auto prod = [&size](const std::string& s) {
    int64_t n = 1;
    for (char c : s) n *= size[c];
    return n;
  };
  Tensor x = reshape(arrange(a, batch + left + inner), {prod(batch), prod(left), prod(inner)});
  Tensor y = reshape(arrange(b, batch + inner + right), {prod(batch), prod(inner), prod(right)});
  Shape out_shape;
  for (char c : batch + left + right) out_shape.push_back(size[c]);
  return {reshape(bmm(x, y), out_shape), batch + left + right};
}

}  // namespace

Tensor einsum(const std::string& raw_equation, const std::vector<Tensor>& operands) {
  if (auto ac = autocast_args("einsum", operands)) return einsum(raw_equation, ac->all());
  std::string equation;
  for (char c : raw_equation)
    if (!std::isspace(static_cast<unsigned char>(c))) equation += c;
  KILN_CHECK(!operands.empty(), Runtime, "[einsum] must provide at least one operand");
  const auto arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> specs;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    specs.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  KILN_CHECK(specs.size() == operands.size(), Runtime, "[einsum] '", raw_equation, "' names ",
             specs.size(), " operands but ", operands.size(), " were given");
  int64_t ell_dims = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].find("...") != std::string::npos)
      ell_dims = std::max(ell_dims, operands[i].dim() - (static_cast<int64_t>(specs[i].size()) - 3));
  }
  std::vector<Term> terms;
  std::map<char, int> counts;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string labels = expand_ellipsis(specs[i], operands[i].dim(), ell_dims, raw_equation);
    Tensor t = operands[i];
    for (size_t j = 0; j < labels.size(); ++j) {
      char c = labels[j];
      KILN_CHECK(std::isalpha(static_cast<unsigned char>(c)) || (c >= kEllipsisBase && c < kEllipsisBase + 10),
                 Value, "[einsum] invalid subscript '", c, "' in '", raw_equation, "'");
      // A label repeated within one operand ("ii->i") reads its diagonal: the
      // two dims become one, moved last, and the label is seen once.
      const size_t k = labels.find(c, j + 1);
      if (k != std::string::npos) {
        KILN_CHECK(t.size(j) == t.size(k), Runtime, "[einsum] subscript '", c,
                   "' is repeated for operand ", i, " but the sizes don't match, ", t.size(j),
                   " != ", t.size(k));
        t = diagonal(t, 0, static_cast<int64_t>(j), static_cast<int64_t>(k));
        labels = labels.substr(0, j) + labels.substr(j + 1, k - j - 1) + labels.substr(k + 1) + c;
        --j;  // position j now holds the next label
        continue;
      }
      if (labels.find(c) == j) counts[c]++;
    }
    terms.push_back({t, labels});
  }
  std::string out;
  if (arrow == std::string::npos) {
    // Implicit output: ellipsis dims, then labels used once, alphabetically.
    for (int64_t i = 0; i < ell_dims; ++i) out += static_cast<char>(kEllipsisBase + i);
    for (auto& [c, n] : counts)
      if (n == 1 && std::isalpha(static_cast<unsigned char>(c))) out += c;
  } else {
    std::string spec = equation.substr(arrow + 2);
    auto pos = spec.find("...");
    if (pos != std::string::npos) {
      std::string ell;
      for (int64_t i = 0; i < ell_dims; ++i) ell += static_cast<char>(kEllipsisBase + i);
      spec = spec.substr(0, pos) + ell + spec.substr(pos + 3);
    }
    for (char c : spec)
      KILN_CHECK(counts.count(c), Runtime, "[einsum] output subscript '", c,
                 "' does not appear in the inputs of '", raw_equation, "'");
    out = spec;
  }
  // Fold operands left to right, keeping labels still needed later or in the output.
  auto needed_after = [&](size_t i) {
    std::string keep = out;
    for (size_t j = i + 1; j < terms.size(); ++j) keep += terms[j].labels;
    return keep;
  };
  Term acc = sum_private(terms[0], needed_after(0));
  for (size_t i = 1; i < terms.size(); ++i) {
    std::string keep = needed_after(i);
    acc = contract(acc, sum_private(terms[i], keep + acc.labels), keep);
  }
  acc = sum_private(acc, out);
  std::vector<int64_t> perm;
  for (char c : out) perm.push_back(static_cast<int64_t>(acc.labels.find(c)));
  return permute(acc.t, perm);
}

}  // namespace kiln

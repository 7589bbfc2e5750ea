// Editing a graph in place: renaming nodes and graphs, rewiring uses, erasing exprs and compile()
// (getattr chains merged, dead exprs removed). Every edit drops the execution plan.
#pragma once

#include <tracemod/graph/graph.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tracemod::graph {

inline void TensorNode::set_dims(const Dims& d) {
  if (d.size() != shape_.rank())
    throw shape_error("TensorNode '" + name() + "': symbolic shape " + to_string(d) + " has rank " +
                      std::to_string(d.size()) + ", but its shape " + shape_.to_string() + " has rank " +
                      std::to_string(shape_.rank()));
  dims_ = is_static(d) ? nullptr : std::make_shared<const Dims>(d);
  if (top_graph() != nullptr) top_graph()->changed();  // the plan checks inputs against the dims
}

inline void Node::set_name(const std::string& name) {
  if (name == name_) return;
  NameSpace& ns = graph_->names();
  if (ns.taken(name))
    throw graph_error("Node.set_name: the name '" + name + "' is already used in " + graph_->name() + ".Graph");
  if (NameSpace::sanitize(name) != name || NameSpace::is_reserved(name))
    throw graph_error("Node.set_name: '" + name + "' is not a valid node name (an identifier that is no C++ keyword)");
  ns.release(name_);
  ns.claim(name, this);
  name_ = name;
  graph_->changed();
}

inline void Expr::replace_inputs(Node* old_node, Node* new_node) {
  const auto where = [&] { return "Expr.replace_inputs (%" + std::to_string(id_) + ")"; };
  const auto it = std::find(inputs_.begin(), inputs_.end(), old_node);
  if (it == inputs_.end()) throw graph_error(where() + ": node '" + old_node->name() + "' is not an input of this expr");
  if (old_node->kind() != new_node->kind())
    throw graph_error(where() + ": node '" + new_node->name() + "' is of another kind than '" + old_node->name() + "'");
  if (new_node->top_graph() != graph_)
    throw graph_error(where() + ": node '" + new_node->name() + "' belongs to another graph");
  const Expr* producer = new_node->expr();
  if (producer->kind() != ExprKind::input && graph_->position(producer) >= graph_->position(this))
    throw graph_error(where() + ": node '" + new_node->name() + "' is produced after this expr");
  *it = new_node;
  auto& users = old_node->users_;
  users.erase(std::find(users.begin(), users.end(), this));
  new_node->users_.push_back(this);
  graph_->changed();
}

inline void Graph::erase(Expr* e) {
  if (e == nullptr) throw graph_error(name_ + ".Graph: cannot delete a null expr");
  const auto it = iterator_of(e);
  if (it == exprs_.end()) throw graph_error(name_ + ".Graph: expr %" + std::to_string(e->id()) + " is not in the graph");
  std::vector<Node*> outs;
  outputs_.flatten(outs);
  for (Node* out : e->outputs()) {
    if (!out->users().empty())
      throw graph_error(name_ + ".Graph: cannot delete %" + std::to_string(e->id()) + " while '" + out->name() +
                        "' still has users");
    if (std::find(outs.begin(), outs.end(), out) != outs.end())
      throw graph_error(name_ + ".Graph: cannot delete %" + std::to_string(e->id()) + ": '" + out->name() +
                        "' is an output of the graph");
  }
  detach(it);
  changed();
}

inline Graph::expr_list::iterator Graph::detach(expr_list::const_iterator it) {
  Expr* e = it->get();
  for (Node* in : e->inputs_) {
    auto& u = in->users_;
    u.erase(std::find(u.begin(), u.end(), e));
  }
  for (const auto& out : e->outputs_) ns_.release(out->name_);
  if (insert_point_ && *insert_point_ == it) insert_point_ = std::next(it);
  return exprs_.erase(it);
}

inline void Graph::rewire(Expr* user, Node* from, Node* to) {
  for (Node*& in : user->inputs_)
    if (in == from) {
      in = to;
      auto& fu = from->users_;
      fu.erase(std::find(fu.begin(), fu.end(), user));
      to->users_.push_back(user);
    }
}

inline void Graph::take_arguments(Expr& e, Expr& donor) {
  for (Node* in : e.inputs_) {
    auto& users = in->users_;
    users.erase(std::find(users.begin(), users.end(), &e));
  }
  for (Node* in : donor.inputs_) *std::find(in->users_.begin(), in->users_.end(), &donor) = &e;
  e.inputs_ = std::move(donor.inputs_);
  donor.inputs_.clear();
  e.args_ = std::move(donor.args_);
  e.kwargs_ = std::move(donor.kwargs_);
  e.invalidate_params();
  erase(&donor);
}

inline void Graph::replace_all_uses(Node* from, Node* to) {
  for (Expr* u : std::vector<Expr*>(from->users_)) {
    rewire(u, from, to);
    u->invalidate_params();
  }
  from->users_.clear();
  outputs_.replace(from, to);
  changed();
}

inline void Graph::rename_unique(Node* n, std::string_view base) {
  ns_.release(n->name_);
  n->name_ = auto_name(base, n);
  changed();
}

inline void Graph::compile() {
  // Only a graph that changes is re-planned: ResNet-18's stage graphs stay planned when their blocks
  // are compiled.
  bool edited = false;
  // Getattr chains and duplicates: `getattr(getattr(self, "a"), "b")` becomes `getattr(self, "a.b")`.
  std::unordered_map<std::string, Node*> first;  // "<base id>/<path>" of the first getattr
  for (const auto& up : exprs_) {
    Expr& e = *up;
    if (e.kind_ != ExprKind::get_attr) continue;
    Node* base = e.inputs_.front();
    const Expr* producer = base->expr_;
    if (producer != nullptr && producer->kind_ == ExprKind::get_attr) {
      Node* root = producer->inputs_.front();
      e.target_ = producer->target_ + "." + e.target_;
      auto& users = base->users_;
      users.erase(std::find(users.begin(), users.end(), &e));
      e.inputs_.front() = root;
      root->users_.push_back(&e);
      edited = true;
    }
    const std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(e.inputs_.front())) + "/" + e.target_;
    const auto [it, fresh] = first.emplace(key, e.output());
    if (!fresh) {
      replace_all_uses(e.output(), it->second);
      edited = true;
    }
  }
  // Dead exprs: everything the outputs do not depend on, found walking back from them.
  std::unordered_set<const Expr*> live;
  const std::vector<Node*> outs = outputs();
  std::vector<const Node*> work(outs.begin(), outs.end());
  while (!work.empty()) {
    const Node* n = work.back();
    work.pop_back();
    const Expr* p = n->expr_;
    if (p == nullptr || p->kind_ == ExprKind::input || !live.insert(p).second) continue;
    for (const Node* in : p->inputs_) work.push_back(in);
  }
  for (auto it = exprs_.end(); it != exprs_.begin();) {
    --it;
    if (live.count(it->get()) != 0) continue;
    it = detach(it);
    edited = true;
  }
  if (edited) changed();
}

inline void Graph::set_name(const std::string& name) {
  if (NameSpace::sanitize(name) != name || NameSpace::is_reserved(name))
    throw graph_error("Graph.set_name: '" + name + "' is not a valid graph name (an identifier that is no C++ keyword)");
  if (name == name_) return;
  if (parent_ != nullptr) {
    if (parent_->ns_.taken(name))
      throw graph_error("Graph.set_name: the name '" + name + "' is already used in " + parent_->name_ + ".Graph");
    parent_->ns_.release(name_);
    parent_->ns_.claim(name, this);
    name_ = name;
    return;
  }
  const std::string old = qualname_;
  const auto requalify = [&](std::string& q) {
    if (q == old || (q.size() > old.size() && q.compare(0, old.size(), old) == 0 && q[old.size()] == '.'))
      q = name + q.substr(old.size());
  };
  for (Graph* g : graphs(true)) {
    requalify(g->qualname_);
    for (Expr* e : g->exprs(false))
      for (Node* n : e->outputs()) requalify(n->qualname_);
  }
  name_ = name;
  changed();
}

}  // namespace tracemod::graph

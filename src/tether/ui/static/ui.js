// tether ui: the only script. Expand or collapse every value tree of a section.
document.addEventListener("click", (event) => {
  const button = event.target.closest("button.expand-all, button.collapse-all");
  if (!button) return;
  const root = document.getElementById(button.dataset.target);
  const open = button.classList.contains("expand-all");
  root?.querySelectorAll("details").forEach((d) => { d.open = open; });
});

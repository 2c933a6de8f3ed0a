// Placeholder until this program is written.
print("not written yet")

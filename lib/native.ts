// Placeholder: replaced by the typed face of the native addon.
export {};

-- Placeholder so that 0019 (#23, branch sizereads) applies before the migrations
-- numbered 0018 land: delete this file when the real 0018 is merged.
SELECT 1;
